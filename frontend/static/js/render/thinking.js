// A reasoning model's thinking in one call (`thinking` frames), folded: a
// native <details> whose summary says "Thinking" and how long it is. The
// text is the model's raw output, so it goes in as text, never as HTML or
// Markdown (it may hold tags, fences, anything).
import { h, icon } from '../dom.js';
import { formatNumber } from '../format.js';

/** "48 words" (what the closed summary says of the thinking). */
export function thinkingGist(content) {
  const words = content.trim().split(/\s+/).filter(Boolean).length;
  return `${formatNumber(words)} ${words === 1 ? 'word' : 'words'}`;
}

/** The folded thinking of one call (`phase`: the frame's), closed. */
export function thinkingBlock({ phase, content }) {
  const text = h('div', { class: 'thinking-text', text: content });
  return h(
    'details',
    { class: 'thinking', dataset: { phase } },
    h(
      'summary',
      { class: 'thinking-summary' },
      icon('bulb', 'thinking-icon'),
      h('span', { class: 'thinking-label', text: 'Thinking' }),
      ' ',
      h('span', { class: 'thinking-gist', text: `· ${thinkingGist(content)}` }),
    ),
    text,
  );
}
