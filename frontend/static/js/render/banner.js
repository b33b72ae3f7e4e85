// The pause-and-answer banner for `agent_request_input`: the question, an input
// that takes focus, a gentle pulse, and a blinking tab title while the tab is
// hidden. Submitting calls `onAnswer(content, questionId)`.
import { byId } from '../dom.js';
import { formatSeconds } from '../format.js';

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

export class QuestionBanner {
  constructor({ onAnswer }) {
    this.element = byId('question-banner');
    this.text = byId('question-text');
    this.stepEl = byId('question-step');
    this.hint = byId('question-hint');
    this.input = byId('question-input');
    this.form = byId('question-form');
    this.message = byId('banner-message');
    this.title = new TitleBlinker();
    this.pending = null;
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      const content = this.input.value.trim();
      if (!content || !this.pending) return;
      onAnswer(content, this.pending.question_id);
    });
  }

  get questionId() {
    return this.pending?.question_id ?? null;
  }

  /** Show `frame`'s question; `live` = it just arrived (not a replayed old one). */
  show(frame, { live }) {
    this.pending = frame;
    this.text.textContent = frame.question;
    this.stepEl.textContent = frame.step ? `Step ${frame.step}` : '';
    this.hint.textContent = frame.timeout_s
      ? `The run waits up to ${formatSeconds(frame.timeout_s)} for your answer. Press Esc to stop it instead.`
      : 'Press Esc to stop the run instead.';
    this.input.value = '';
    this.message.hidden = true;
    this.element.hidden = false;
    this.element.classList.remove('pulse');
    void this.element.offsetWidth; // restart the animation
    this.element.classList.add('pulse');
    this.title.set('❓ Your answer is needed — loopwire');
    if (live || document.activeElement === document.body) this.input.focus();
  }

  /** Hide the banner; `message` (if any) says why, where the banner was. */
  clear(message = null) {
    if (!this.pending) return;
    const hadFocus = this.element.contains(document.activeElement);
    this.pending = null;
    this.element.hidden = true;
    this.element.classList.remove('pulse');
    this.title.set(null);
    if (message) {
      this.message.textContent = message;
      this.message.hidden = false;
    }
    return hadFocus;
  }

  hideMessage() {
    this.message.hidden = true;
  }
}
