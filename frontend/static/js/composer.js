// The composer: the message box, its Send and Stop buttons, Enter to send, and
// the hint under it. While a question waits it is the answer box (its label,
// placeholder and button say so, and Enter sends the answer). While a run
// works a message is still sent: to steer the run, to queue after it, or to
// stop it and run now (the menu next to Send; steer is the default in an
// agent run, queue otherwise).
import { byId } from './dom.js';
import { WHEN_BUSY } from './render/pending.js';

export class Composer {
  /**
   * `onChange` is called when what the page shows may have changed (the text
   * typed, a message sent); `touch` is the `(pointer: coarse)` media query.
   */
  constructor({ input, controller, connection, banner, touch, onChange }) {
    this.input = input;
    this.controller = controller;
    this.connection = connection;
    this.banner = banner;
    this.touch = touch;
    this.onChange = onChange;
    this.form = byId('composer');
    this.sendButton = byId('send-button');
    this.sendLabel = byId('send-label');
    this.stopButton = byId('stop-button');
    this.stopLabel = byId('stop-label');
    this.hint = byId('composer-hint');
    this.whenBusyChip = byId('when-busy-chip');
    this.whenBusy = byId('when-busy');
    /** The run the menu's choice was made for (a new run starts at its default). */
    this.whenBusyRun = null;
    this.defaultHint = this.hint.cloneNode(true).childNodes;

    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.submit();
    });
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.submit();
      }
    });
    input.addEventListener('input', () => {
      this.autosize();
      this.onChange();
    });
    this.stopButton.addEventListener('click', () => controller.stop());
    this.whenBusy.addEventListener('change', () => this.refresh());
    banner.onAnswer = (content, action) => this.sendAnswer(content, action);
  }

  focus() {
    this.input.focus();
    return true;
  }

  /** The buttons and the mode, after anything changed. */
  refresh() {
    const running = this.controller.running;
    const connected = this.connection.isOpen;
    const answering = this.banner.answering;
    this.stopButton.hidden = !running;
    this.stopButton.disabled = !running;
    this.stopLabel.textContent = this.controller.state.stopRequested ? 'Stopping…' : 'Stop';
    this.sendButton.disabled = !connected || this.input.value.trim() === '';
    this.showMode(answering);
    this.showWhenBusy(running && !answering);
  }

  /** The menu of what a message sent now does to the run that works. */
  showWhenBusy(busy) {
    this.whenBusyChip.hidden = !busy;
    const run = busy ? this.controller.state.active ?? this.controller.state.pending?.view ?? null : null;
    if (run !== this.whenBusyRun) {
      this.whenBusyRun = run;
      if (run) this.whenBusy.value = run.agent ? 'steer' : 'queue';
    }
    if (busy) this.sendLabel.textContent = WHEN_BUSY[this.whenBusy.value].send;
    else if (this.form.dataset.mode === 'message') this.sendLabel.textContent = 'Send';
  }

  /** The message box is the answer box while a question waits. */
  showMode(answering) {
    const { form, input } = this;
    if (form.dataset.mode === (answering ? 'answer' : 'message')) return;
    form.dataset.mode = answering ? 'answer' : 'message';
    input.placeholder = answering ? 'Type your answer…' : 'Message loopwire…';
    if (answering) input.setAttribute('aria-label', 'Your answer');
    else input.removeAttribute('aria-label');
    this.sendLabel.textContent = answering ? 'Send answer' : 'Send';
  }

  /** An alert under the box (null: the usual hint back). */
  setHint(text) {
    if (text) this.hint.textContent = text;
    else this.hint.replaceChildren(...[...this.defaultHint].map((node) => node.cloneNode(true)));
    this.hint.dataset.alert = String(Boolean(text));
  }

  /** The hint shows an alert. */
  get alerting() {
    return this.hint.dataset.alert === 'true';
  }

  autosize() {
    this.input.style.height = 'auto';
    this.input.style.height = `${Math.min(this.input.scrollHeight, 240)}px`;
  }

  /** Put `text` in the box (an example prompt) and focus it. */
  setText(text) {
    this.input.value = text;
    this.autosize();
    this.onChange();
    this.focus();
  }

  /** A chat the server refused: its text goes back into the box, if the box is empty. */
  restore(content) {
    if (this.input.value.trim()) return;
    this.input.value = content;
    this.autosize();
  }

  /** Send `content` (typed, or picked in the question's form) as the answer;
   * `action` 'decline' / 'cancel' (no content) says no to the question. */
  sendAnswer(content, action = null) {
    const { input, controller, banner } = this;
    const typed = input.value;
    input.value = ''; // before the banner goes: it puts back a set-aside draft
    if (controller.answer(content, banner.questionId, action)) {
      this.setHint(null);
    } else {
      input.value = typed.trim() ? typed : content;
      this.setHint('Not connected — your answer stays here until the connection is back.');
    }
    this.autosize();
    this.onChange();
  }

  /** Enter or Send: the answer to the waiting question, else a new message. */
  submit() {
    const { input, controller, banner } = this;
    if (banner.answering) {
      const content = input.value.trim();
      if (content) this.sendAnswer(content);
      return;
    }
    if (!this.connection.isOpen) {
      this.setHint('Not connected — your message stays here until the connection is back.');
      return;
    }
    // between runs a held message may be about to start: a new one waits behind it
    const busy = controller.running ? this.whenBusy.value : controller.held.waiting ? 'queue' : null;
    if (busy ? controller.sendHeld(input.value, busy) : controller.sendChat(input.value)) {
      input.value = '';
      this.autosize();
      this.setHint(null);
    }
    this.onChange();
  }
}
