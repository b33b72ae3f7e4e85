// The page of a share link (`/s/<id>`): the server wrote each answer as
// escaped text; here it becomes Markdown through the chat page's own
// renderer (sanitised, no remote resources). Without scripts the text stays.
import { setMarkdown } from './markdown.js';

for (const element of document.querySelectorAll('[data-markdown]')) {
  setMarkdown(element, element.textContent);
  element.removeAttribute('data-markdown'); // rendered: no longer plain text
}
