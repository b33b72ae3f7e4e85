// "Instructions": what the user writes once for every answer to follow —
// their own, for all their conversations (`GET/PUT /api/me/instructions`),
// and the open conversation's, added to them (`GET/PATCH
// /api/conversations/{id}`, shown only once the conversation is stored).
// A modal dialog opened from the sidebar's foot: two textareas with
// character counters against the server's limit, Save and Cancel; a
// refusal (e.g. over the limit) is shown in the dialog, which stays open.
import { call } from '../conversations.js';
import { byId } from '../dom.js';

const OWN = '/api/me/instructions';
const CONVERSATIONS = '/api/conversations';

function sent(method, path, instructions) {
  return call(path, { method, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ instructions }) });
}

const conversationPath = (id) => `${CONVERSATIONS}/${encodeURIComponent(id)}`;

export class InstructionsDialog {
  /** `currentId()`: the conversation shown if the server keeps it (null: none yet). */
  constructor({ currentId }) {
    this.dialog = byId('instructions');
    this.form = byId('instructions-form');
    this.button = byId('instructions-button');
    this.own = byId('instructions-own');
    this.here = byId('instructions-here');
    this.hereField = byId('instructions-here-field');
    this.status = byId('instructions-status');
    this.save = byId('instructions-save');
    this.currentId = currentId;
    this.maxChars = null;
    this.loaded = { own: '', here: '' };
    this.conversation = null; // the stored conversation the second field is for
    this.button.addEventListener('click', () => this.open());
    byId('instructions-cancel').addEventListener('click', () => this.dialog.close());
    this.form.addEventListener('submit', (event) => {
      event.preventDefault(); // closed once saved, not before
      this.submit();
    });
    for (const area of [this.own, this.here]) area.addEventListener('input', () => this.count(area));
  }

  async open() {
    this.failed(null);
    this.own.value = this.here.value = '';
    this.hereField.hidden = true;
    this.save.disabled = true;
    this.own.readOnly = this.here.readOnly = true; // nothing typed is lost to the load
    if (!this.dialog.open) this.dialog.showModal();
    try {
      await this.load();
      this.save.disabled = false;
      this.own.readOnly = this.here.readOnly = false;
    } catch (error) {
      this.failed(`Your instructions could not be loaded: ${error.message}`);
    }
    this.own.focus();
  }

  async load() {
    const id = this.currentId();
    const [own, here] = await Promise.all([call(OWN), id ? call(conversationPath(id)).catch((error) => this.unsaved(error)) : null]);
    this.maxChars = own.max_chars;
    this.conversation = here ? id : null;
    this.loaded = { own: own.instructions, here: here?.instructions ?? '' };
    this.own.value = this.loaded.own;
    this.here.value = this.loaded.here;
    this.hereField.hidden = !here;
    this.count(this.own);
    this.count(this.here);
  }

  /** A conversation the server does not keep yet has no instructions of its own. */
  unsaved(error) {
    if (error.status === 404) return null;
    throw error;
  }

  count(area) {
    const counter = byId(`${area.id}-count`);
    const over = this.maxChars !== null && area.value.length > this.maxChars;
    counter.textContent = `${area.value.length} / ${this.maxChars ?? '…'} characters`;
    counter.classList.toggle('instructions-over', over);
    area.setAttribute('aria-invalid', String(over));
  }

  /** Why the text cannot be kept, said before asking the server (which checks it too). */
  tooLong() {
    const fields = [
      [this.own, 'For all your conversations'],
      [this.here, 'For this conversation'],
    ];
    for (const [area, name] of fields) {
      const counted = this.maxChars !== null && !(area === this.here && this.hereField.hidden);
      if (counted && area.value.length > this.maxChars) {
        return `“${name}” is ${area.value.length} characters; the limit is ${this.maxChars}.`;
      }
    }
    return null;
  }

  async submit() {
    const problem = this.tooLong();
    if (problem) {
      this.failed(`Not saved: ${problem}`);
      return;
    }
    this.save.disabled = true;
    this.failed(null);
    try {
      if (this.own.value !== this.loaded.own) {
        this.loaded.own = (await sent('PUT', OWN, this.own.value)).instructions;
      }
      if (this.conversation && this.here.value !== this.loaded.here) {
        this.loaded.here = (await sent('PATCH', conversationPath(this.conversation), this.here.value)).instructions;
      }
    } catch (error) {
      this.failed(`Not saved: ${error.message}`);
      this.save.disabled = false;
      return;
    }
    this.save.disabled = false;
    this.dialog.close();
  }

  failed(message) {
    this.status.hidden = message === null;
    this.status.textContent = message ?? '';
  }
}
