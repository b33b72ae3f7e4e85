// The pause-and-answer strip for `agent_request_input`: it says the agent
// waits (the question itself is in the run), makes the message box the answer
// box, pulses gently, and blinks the tab title while the tab is hidden.
import { byId, h } from '../dom.js';
import { formatSeconds } from '../format.js';
import { questionForm } from './answer_form.js';

const BLINK_MS = 1000;

class TitleBlinker {
  constructor() {
    this.base = document.title;
    this.message = null;
    this.timer = null;
    document.addEventListener('visibilitychange', () => this.sync());
  }

  set(message) {
    this.message = message;
    this.sync();
  }

  sync() {
    const wanted = this.message !== null && document.hidden;
    if (wanted && this.timer === null) {
      let on = false;
      this.timer = setInterval(() => {
        on = !on;
        document.title = on ? this.message : this.base;
      }, BLINK_MS);
      document.title = this.message;
    } else if (!wanted && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
      document.title = this.base;
    }
  }
}

/** Touch screens have no Esc key: the hint names the button instead. */
const TOUCH = window.matchMedia('(pointer: coarse)');

/**
 * While a question waits, the strip above the message box says so (the
 * question itself shows once, in the run) and the message box becomes the
 * answer box: relabelled, its draft set aside and put back afterwards;
 * Enter sends the answer (`answering` tells the composer).
 */
export class QuestionBanner {
  constructor({ input }) {
    this.element = byId('question-banner');
    this.stepEl = byId('question-step');
    this.hint = byId('question-hint');
    this.titleEl = byId('question-title');
    this.defaultTitle = this.titleEl.textContent;
    this.message = byId('banner-message');
    this.input = input;
    this.title = new TitleBlinker();
    this.pending = null;
    this.draft = '';
    /** Sends an answer picked in the question's form, `(content, action)`
     * (action: null, or 'decline' / 'cancel'); set by the composer. */
    this.onAnswer = null;
    this.formSlot = h('div', { class: 'answer-form-slot' });
    this.element.append(this.formSlot);
    byId('question-show').addEventListener('click', () => this.reveal());
  }

  get questionId() {
    return this.pending?.question_id ?? null;
  }

  get answering() {
    return this.pending !== null;
  }

  /** Show `frame`'s question; `live` = it just arrived (not a replayed old one). */
  show(frame, { live }) {
    if (!this.pending) {
      this.draft = this.input.value;
      this.input.value = '';
      this.input.dispatchEvent(new Event('input'));
    }
    this.pending = frame;
    this.stepEl.textContent = frame.step ? `Step ${frame.step}` : '';
    const stop = TOUCH.matches ? 'tap Stop' : 'press Esc';
    const { form, hint, title } = questionForm(frame, (content, action) => this.onAnswer?.(content, action));
    this.titleEl.textContent = title ?? this.defaultTitle;
    const how = hint ?? 'Type it in the message box.';
    this.hint.textContent = frame.timeout_s
      ? `${how} The run waits up to ${formatSeconds(frame.timeout_s)}; ${stop} to end it instead.`
      : `${how.slice(0, -1)}, or ${stop} to end the run.`;
    this.formSlot.replaceChildren(...(form ? [form] : []));
    this.message.hidden = true;
    this.element.hidden = false;
    this.element.classList.remove('pulse');
    void this.element.offsetWidth; // restart the animation
    this.element.classList.add('pulse');
    this.title.set('❓ Your answer is needed — loopwire');
    const first = form?.querySelector('button, input, select, a') ?? this.input;
    if (live || document.activeElement === document.body) first.focus();
  }

  /** The question card in the run, scrolled into view and briefly marked. */
  reveal() {
    const id = this.questionId;
    if (id === null) return;
    const card = document.querySelector(`.question-card[data-question-id="${CSS.escape(id)}"]`);
    card?.scrollIntoView({ block: 'center', behavior: 'smooth' });
    card?.classList.remove('flash');
    void card?.offsetWidth;
    card?.classList.add('flash');
    this.input.focus();
  }

  /** Hide the banner; `message` (if any) says why, where the banner was. */
  clear(message = null) {
    if (!this.pending) return;
    this.pending = null;
    this.formSlot.replaceChildren();
    this.element.hidden = true;
    this.element.classList.remove('pulse');
    this.title.set(null);
    if (this.draft && !this.input.value.trim()) {
      this.input.value = this.draft;
      this.input.dispatchEvent(new Event('input'));
    }
    this.draft = '';
    if (message) {
      this.message.textContent = message;
      this.message.hidden = false;
    }
  }

  hideMessage() {
    this.message.hidden = true;
  }
}
