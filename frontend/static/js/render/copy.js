// Copy buttons: a message's text, and each code block of a rendered answer.
// The clipboard gets plain text; the button says "Copied" for a moment (or
// why it could not copy: the page may not be allowed to).
import { h, icon } from '../dom.js';

const FEEDBACK_MS = 1500;

/** A small button that copies `text()` to the clipboard. */
export function copyButton(text, { label = 'Copy', what = 'message' } = {}) {
  const caption = h('span', { text: label });
  const button = h('button', { type: 'button', class: 'copy-button', 'aria-label': `Copy ${what}` }, icon('copy'), caption);
  let timer = null;
  button.addEventListener('click', async () => {
    let shown = 'Copied';
    try {
      await navigator.clipboard.writeText(text());
    } catch {
      shown = 'Copy failed';
    }
    caption.textContent = shown;
    button.dataset.copied = String(shown === 'Copied');
    clearTimeout(timer);
    timer = setTimeout(() => {
      caption.textContent = label;
      delete button.dataset.copied;
    }, FEEDBACK_MS);
  });
  return button;
}

/** A copy button on every code block inside `container`. */
export function addCodeCopyButtons(container) {
  for (const pre of container.querySelectorAll('pre')) {
    const code = pre.querySelector('code') ?? pre;
    pre.classList.add('has-copy');
    pre.append(copyButton(() => code.textContent, { what: 'code' }));
  }
}
