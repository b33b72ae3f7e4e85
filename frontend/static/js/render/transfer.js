// Export and import of a conversation, from the sidebar.
//
// Each conversation's row has an Export button opening a small menu:
// "Export as Markdown" and "Export as JSON" download the server's export
// (`GET /api/conversations/{id}/export?format=…`), named as the server names
// it. "Import" in the sidebar takes a JSON export (a file chosen by the
// person), sends it (`POST /api/conversations/import`) and hands the new
// conversation to `onImported`; a refusal (not JSON, not an export) is the
// server's message, given to `onError`.
import { byId } from '../dom.js';

const BASE = '/api/conversations';
const FORMATS = { markdown: 'Markdown', json: 'JSON' };

/** The server's message from a refused response (or its status). */
async function refusal(response) {
  const body = await response.json().catch(() => null);
  return body?.message ?? `The server answered ${response.status}.`;
}

async function send(path, options = {}) {
  try {
    return await fetch(new URL(path, window.location.href), { credentials: 'same-origin', cache: 'no-store', ...options });
  } catch {
    throw new Error('The server could not be reached.');
  }
}

/** The file name a `Content-Disposition: attachment; filename="…"` gives. */
function fileName(response, fallback) {
  const disposition = response.headers.get('Content-Disposition') ?? '';
  return /filename="([^"]+)"/.exec(disposition)?.[1] ?? fallback;
}

/** Download conversation `id` as `format` (markdown | json); throws the server's refusal. */
export async function downloadExport(id, format) {
  const query = new URLSearchParams({ format });
  const response = await send(`${BASE}/${encodeURIComponent(id)}/export?${query}`);
  if (!response.ok) throw new Error(await refusal(response));
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = fileName(response, `conversation.${format === 'json' ? 'json' : 'md'}`);
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

/** Send a JSON export (a File) as a new conversation: the server's answer
 * `{id, title, messages, left_out, …}`; throws the reason it was refused. */
export async function importExport(file) {
  let exported;
  try {
    exported = JSON.parse(await file.text());
  } catch {
    throw new Error(`“${file.name}” is not a JSON export.`);
  }
  const response = await send(`${BASE}/import`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(exported),
  });
  if (!response.ok) throw new Error(await refusal(response));
  return response.json();
}

/** The Export menu, one for all rows: shown under the row's button. */
export class ExportMenu {
  constructor({ onError }) {
    this.element = byId('export-menu');
    this.onError = onError;
    this.items = [...this.element.querySelectorAll('[data-format]')];
    this.button = null;
    this.id = null;
    this.element.addEventListener('click', (event) => {
      const item = event.target.closest('[data-format]');
      if (item) this.choose(item.dataset.format);
    });
    this.element.addEventListener('keydown', (event) => this.keyed(event));
    this.element.addEventListener('toggle', (event) => {
      if (event.newState === 'closed') this.closed();
    });
  }

  /** Open under `button` (a row's Export) for conversation `id`; a second click closes. */
  toggle(button, id) {
    const again = this.button === button && this.element.matches(':popover-open');
    if (this.element.matches(':popover-open')) this.element.hidePopover();
    if (again) return;
    this.button = button;
    this.id = id;
    button.classList.add('export-anchor');
    button.setAttribute('aria-expanded', 'true');
    this.element.setAttribute('aria-label', `Export “${button.dataset.title}”`);
    this.element.showPopover();
    this.items[0].focus();
  }

  closed() {
    const button = this.button;
    if (!button) return;
    button.classList.remove('export-anchor');
    button.setAttribute('aria-expanded', 'false');
    this.button = null;
    if (this.element.contains(document.activeElement) || document.activeElement === document.body) button.focus();
  }

  async choose(format) {
    const id = this.id;
    this.element.hidePopover();
    try {
      await downloadExport(id, format);
    } catch (error) {
      this.onError(`Not exported as ${FORMATS[format]}: ${error.message}`);
    }
  }

  /** Arrow keys move between the items; Escape closes the menu. */
  keyed(event) {
    if (event.key === 'Escape') {
      event.preventDefault(); // the menu's, not the drawer's nor the run's
      this.element.hidePopover();
      return;
    }
    const at = this.items.indexOf(document.activeElement);
    const moves = { ArrowDown: 1, ArrowUp: -1, Home: -at, End: this.items.length - 1 - at };
    if (!(event.key in moves) || at < 0) return;
    event.preventDefault();
    const next = (at + moves[event.key] + this.items.length) % this.items.length;
    this.items[next].focus();
  }
}

/** The sidebar's Import button and its file picker. */
export class Importer {
  constructor({ onImported, onError }) {
    this.button = byId('import-button');
    this.input = byId('import-file');
    this.button.addEventListener('click', () => this.input.click());
    this.input.addEventListener('change', async () => {
      const [file] = this.input.files;
      this.input.value = ''; // the same file may be chosen again
      if (!file) return;
      this.button.disabled = true;
      try {
        onImported(await importExport(file));
      } catch (error) {
        onError(`Not imported: ${error.message}`);
      } finally {
        this.button.disabled = false;
      }
    });
  }
}

/** A conversation with messages and no runs (an import): each user message
 * as an earlier run of its own, for the page to show with its answer. */
export function runsOfImport(messages) {
  return messages
    .filter((message) => message.role === 'user')
    .map((message, index) => ({ id: `imported-${index}`, request: message.content ?? '', mode: 'plain', status: 'imported', steps: 0 }));
}
