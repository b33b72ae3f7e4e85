// Editing a message the user sent: the bubble becomes a small editor; sending
// the new text replaces that message's run and everything after it.
import { h } from '../dom.js';

/** Turn `bubble` into an editor for `content`; `onSend(text)` returns true when it went out. */
export function editInPlace(bubble, content, { onSend }) {
  if (bubble.querySelector('.edit-form')) return;
  const shown = [...bubble.children];
  const field = h('textarea', { class: 'edit-input', rows: '3', 'aria-label': 'Edit your message' });
  field.value = content;
  const note = h('p', { class: 'edit-note', text: 'Sending replaces this message and everything after it.' });
  const cancel = h('button', { type: 'button', class: 'button button-quiet', text: 'Cancel' });
  const send = h('button', { type: 'submit', class: 'button button-primary', text: 'Send' });
  const form = h('form', { class: 'edit-form' }, field, note, h('div', { class: 'edit-buttons' }, cancel, send));

  const close = () => {
    form.remove();
    for (const child of shown) child.hidden = false;
    bubble.classList.remove('turn-editing');
    bubble.querySelector('.edit-button')?.focus();
  };
  const submit = () => {
    const text = field.value.trim();
    if (!text) return;
    if (onSend(text)) close();
  };
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit();
  });
  cancel.addEventListener('click', close);
  field.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    } else if (event.key === 'Escape') {
      event.preventDefault(); // the page's Esc (stop, drawers) is not for this
      close();
    }
  });

  for (const child of shown) child.hidden = true;
  bubble.classList.add('turn-editing');
  bubble.append(form);
  field.focus();
  field.setSelectionRange(field.value.length, field.value.length);
}
