// The conversation list: user bubbles, assistant runs, notices; keeps the
// view pinned to the bottom while the user has not scrolled up.
import { copyButton } from './copy.js';
import { editInPlace } from './edit.js';
import { h, icon } from '../dom.js';
import { ERROR } from '../protocol.js';
import { formatReset } from './budget.js';

const ERROR_TITLES = {
  [ERROR.INVALID_MESSAGE]: 'The server refused a message',
  [ERROR.BUSY]: 'Still busy with the previous message',
  [ERROR.NO_PENDING_INPUT]: 'No question is waiting for an answer',
  [ERROR.NO_PENDING_APPROVAL]: 'No approval is pending',
  [ERROR.NO_ACTIVE_RUN]: 'Nothing is running',
  [ERROR.LLM_ERROR]: 'The model could not answer',
  [ERROR.UNAUTHORIZED]: 'Not allowed to connect',
  [ERROR.RATE_LIMITED]: 'Too many requests',
  [ERROR.INTERNAL_ERROR]: 'Something went wrong on the server',
  [ERROR.BUDGET_EXHAUSTED]: 'Your daily budget is used up',
};

const MODE_LABELS = { agent: 'Agent', tools: 'With tools', retrieve: 'Documents', plain: null };

export function errorTitle(errorType) {
  return ERROR_TITLES[errorType] ?? 'Error';
}

export class MessageList {
  constructor({ list, scroller, emptyState }) {
    this.list = list;
    this.scroller = scroller;
    this.emptyState = emptyState;
    this.onEdit = null; // (runId, text) => true when the edited message went out
    this.pinned = true;
    scroller.addEventListener('scroll', () => {
      const gap = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight;
      this.pinned = gap < 48;
    });
    new MutationObserver(() => this.stick()).observe(list, { childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ['open', 'hidden'] });
  }

  stick() {
    this.emptyState.hidden = this.list.childElementCount > 0;
    if (this.pinned) this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  add(element) {
    this.list.append(element);
    return element;
  }

  addUser(content, mode) {
    this.pinned = true;
    return this.add(this.userBubble(content, mode));
  }

  /** Put `elements` above everything shown (runs older than the replay). */
  addEarlier(elements) {
    this.list.prepend(...elements);
  }

  userBubble(content, mode) {
    const label = MODE_LABELS[mode];
    const edit = h('button', { type: 'button', class: 'copy-button edit-button', 'aria-label': 'Edit message' }, icon('pencil'), h('span', { text: 'Edit' }));
    const bubble = h(
      'li',
      { class: 'turn turn-user', dataset: { mode: mode ?? '' } },
      h('div', { class: 'bubble' }, h('p', { class: 'bubble-text', text: content })),
      h('div', { class: 'turn-user-foot' }, label ? h('span', { class: 'turn-tag', text: label }) : null, copyButton(() => content, { what: 'message' }), edit),
    );
    edit.addEventListener('click', () => {
      editInPlace(bubble, content, { onSend: (text) => Boolean(this.onEdit?.(bubble.dataset.runId, text)) });
    });
    bubble.setAttribute('aria-label', 'You');
    return bubble;
  }

  /** The message's run is known: it can be edited from now on. */
  bindUser(bubble, runId) {
    bubble.dataset.runId = runId;
  }

  markUnsent(bubble, why) {
    bubble.classList.add('turn-unsent');
    bubble.append(h('span', { class: 'turn-tag turn-tag-error', text: why }));
  }

  notice({ kind = 'error', title, text }) {
    const element = h(
      'li',
      { class: `notice notice-${kind}`, role: kind === 'error' ? 'alert' : 'note' },
      icon(kind === 'error' ? 'alert' : 'info'),
      h('div', { class: 'notice-body' }, title ? h('strong', { class: 'notice-title', text: title }) : null, text ? h('span', { class: 'notice-text', text }) : null),
    );
    return this.add(element);
  }

  errorNotice({ error_type: errorType, message, resets_at: resetsAt }) {
    const text = typeof resetsAt === 'number' ? `${message} (${formatReset(resetsAt)}, your time).` : message;
    const notice = this.notice({ kind: 'error', title: errorTitle(errorType), text });
    if (errorType === ERROR.BUDGET_EXHAUSTED) notice.classList.add('notice-budget');
    return notice;
  }

  clear() {
    this.list.replaceChildren();
    this.pinned = true;
    this.stick();
  }
}
