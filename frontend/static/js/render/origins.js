// Which conversations the sidebar lists: by default the page's own (and
// those from before conversations were tagged, and imports); with "Show
// conversations from scripts" on (remembered in localStorage), all of them,
// each started elsewhere marked with a small tag (CLI, Python, API…).
// The server filters (`GET /api/conversations?origin=…`).
import { byId, h } from '../dom.js';

const KEY = 'loopwire.show_scripts';
export const OWN = ['page', 'unknown', 'import'];
const TAGS = {
  python: ['Python', 'Started by the Python client'],
  cli: ['CLI', 'Started by the command line'],
  api: ['API', 'Started over the HTTP agent API'],
  openai: ['OpenAI', 'Started over the OpenAI-compatible API'],
  'ag-ui': ['AG-UI', 'Started by an AG-UI client'],
  'ai-sdk': ['AI SDK', 'Started by an AI SDK client'],
  ws: ['Script', 'Started by a WebSocket client'],
  import: ['Imported', 'Imported from an export'],
};

export class OriginFilter {
  constructor({ onChange, storage = window.localStorage }) {
    this.storage = storage;
    this.input = byId('show-scripts');
    this.input.checked = this.remembered();
    this.input.addEventListener('change', () => {
      try {
        this.storage.setItem(KEY, this.input.checked ? '1' : '0');
      } catch {
        // storage disabled: the choice lasts until the reload
      }
      onChange();
    });
  }

  remembered() {
    try {
      return this.storage.getItem(KEY) === '1';
    } catch {
      return false;
    }
  }

  get all() {
    return this.input.checked;
  }

  /** What to ask the server for: the origins listed (null: all). */
  get origins() {
    return this.all ? null : OWN;
  }

  /** The tag of a conversation started elsewhere than the page (null: none). */
  tag(item) {
    const known = this.all ? TAGS[item.origin] : null;
    if (!known) return null;
    const [label, title] = known;
    return h('span', { class: 'conversation-origin', title, text: label });
  }
}

/** A row's title with its origin tag beside it (the title alone without one). */
export function withTag(title, tag) {
  return tag ? h('span', { class: 'conversation-head' }, title, tag) : title;
}
