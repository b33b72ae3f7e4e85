// A short notice with an action, above the composer: "Conversation deleted ·
// Undo". `show` returns a promise of how it ended: 'undo' (the action),
// 'dismissed' (its close button, or a newer toast) or 'expired'. While the
// pointer or focus is on it, the clock does not run.
import { byId, h, icon } from '../dom.js';

export class Toast {
  constructor() {
    this.element = byId('toast');
    this.current = null;
  }

  show(text, { action = 'Undo', ms = 8000 } = {}) {
    this.current?.end('dismissed');
    return new Promise((resolve) => {
      let timer = null;
      let left = ms;
      let startedAt = 0;
      const toast = {
        end: (how) => {
          clearTimeout(timer);
          if (this.current === toast) {
            this.current = null;
            this.element.hidden = true;
            this.element.replaceChildren();
          }
          resolve(how);
        },
      };
      const run = () => {
        clearTimeout(timer);
        startedAt = performance.now();
        timer = setTimeout(() => toast.end('expired'), left);
      };
      const pause = () => {
        clearTimeout(timer);
        left = Math.max(1000, left - (performance.now() - startedAt));
      };
      const actionButton = h('button', { type: 'button', class: 'link-button toast-action', text: action });
      actionButton.addEventListener('click', () => toast.end('undo'));
      const close = h('button', { type: 'button', class: 'icon-button', 'aria-label': 'Dismiss', title: 'Dismiss' }, icon('cross'));
      close.addEventListener('click', () => toast.end('dismissed'));
      this.element.replaceChildren(h('span', { class: 'toast-text', text }), actionButton, close);
      this.element.hidden = false;
      this.element.onpointerenter = pause;
      this.element.onpointerleave = run;
      this.element.onfocusin = pause;
      this.element.onfocusout = run;
      this.current = toast;
      run();
    });
  }

  /** End the one on screen now, as dismissed (its consequence happens). */
  dismiss() {
    this.current?.end('dismissed');
  }
}
