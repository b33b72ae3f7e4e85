// Messages sent while a run works (`chat.when_busy`), shown above the composer
// until the server uses them: a steer is told to the run at its next step
// (`agent_interjection`), a queued or interrupting message starts a run of its
// own (`pending_input` `started`); Cancel drops one unused (`cancel_input`).
import { h, icon } from '../dom.js';

/** The Send button's label for each choice of the menu next to it (index.html). */
export const WHEN_BUSY = Object.freeze({
  steer: { send: 'Steer' },
  queue: { send: 'Queue' },
  interrupt: { send: 'Send now' },
});

/** The reason the server gives when the user cancelled one. */
export const OWN_CANCEL = 'cancelled by the user';

function modeText(mode, next) {
  if (mode === 'steer') return 'Will be told to the agent at its next step';
  if (mode === 'interrupt') return 'Stopping the run — runs next';
  return next ? 'Queued — runs next' : 'Queued';
}

let arrivals = 0;

/** Higher goes first: interrupts (the newest first), then the rest as they came. */
function rank({ frame, order }) {
  return frame.mode === 'interrupt' ? order : -order;
}

export class HeldList {
  /** `onCancel(inputId)` sends the cancel; true when it went out. */
  constructor({ section, list, onCancel }) {
    this.section = section;
    this.list = list;
    this.onCancel = onCancel;
    /** input_id → {frame, element} */
    this.items = new Map();
    /** Chats sent with `when_busy` not yet announced: {content, mode}, oldest first. */
    this.outbox = [];
    /** Cancels sent whose outcome has not come yet. */
    this.cancelling = new Set();
    /** input_id → the run mode ('agent', 'tools', …) its chat was sent with. */
    this.modes = new Map();
  }

  /** A chat went out with `when_busy`; `mode` is the kind of run it asks for. */
  sent(content, mode) {
    this.outbox.push({ content, mode });
  }

  /** The chat sent first was refused: its text (null if none was waiting). */
  refused() {
    return this.outbox.shift()?.content ?? null;
  }

  /** A run started with no announcement (the run before ended first): its chat. */
  unannounced() {
    return this.outbox.shift() ?? null;
  }

  /** Anything held or on its way, so a new message should wait behind it. */
  get waiting() {
    return this.items.size > 0 || this.outbox.length > 0;
  }

  /** The run mode a held input was sent with, if this tab sent it. */
  modeOf(inputId) {
    return this.modes.get(inputId) ?? null;
  }

  /** A `pending_input` `queued` frame: show it (or update its place). */
  queued(frame) {
    const index = this.outbox.findIndex((said) => said.content === frame.content);
    if (index >= 0) this.modes.set(frame.input_id, this.outbox.splice(index, 1)[0].mode);
    const known = this.items.get(frame.input_id);
    if (known) known.element.remove();
    const element = this.card(frame);
    this.items.set(frame.input_id, { frame, element, order: known?.order ?? ++arrivals });
    this.render();
  }

  card(frame) {
    const cancel = h('button', { type: 'button', class: 'button button-quiet held-cancel', 'aria-label': `Cancel “${frame.content}”` }, h('span', { text: 'Cancel' }));
    cancel.addEventListener('click', () => {
      if (this.onCancel(frame.input_id)) {
        this.cancelling.add(frame.input_id);
        cancel.disabled = true;
      }
    });
    return h(
      'li',
      { class: 'held-item', dataset: { inputId: frame.input_id, mode: frame.mode } },
      icon(frame.mode === 'steer' ? 'loop' : 'info'),
      h('div', { class: 'held-body' }, h('p', { class: 'held-text', text: frame.content }), h('p', { class: 'held-mode' })),
      cancel,
    );
  }

  /** The held input is used or dropped: it goes. */
  remove(inputId) {
    const item = this.items.get(inputId);
    this.cancelling.delete(inputId);
    if (!item) return null;
    item.element.remove();
    this.items.delete(inputId);
    this.render();
    return item.frame;
  }

  /** A cancel came too late (the input was used): true if one was waiting. */
  cancelRefused() {
    const [first] = this.cancelling;
    if (first === undefined) return false;
    this.cancelling.delete(first);
    const button = this.items.get(first)?.element.querySelector('.held-cancel');
    if (button) button.disabled = false;
    return true;
  }

  /** Order as the server uses them (an interrupt first, newest first; then
   * as sent) and say what each will do. */
  render() {
    const items = [...this.items.values()].sort((a, b) => rank(b) - rank(a));
    let next = true;
    for (const { frame, element } of items) {
      element.querySelector('.held-mode').textContent = modeText(frame.mode, next);
      if (frame.mode !== 'steer') next = false;
    }
    this.list.replaceChildren(...items.map((item) => item.element));
    this.section.hidden = items.length === 0;
  }

  clear() {
    this.items.clear();
    this.outbox = [];
    this.cancelling.clear();
    this.list.replaceChildren();
    this.section.hidden = true;
  }
}
