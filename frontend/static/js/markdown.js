// Model output → a sanitised DocumentFragment. Nothing here ever runs script or
// loads a remote resource:
//  - raw HTML in the Markdown is escaped (shown as text), never interpreted;
//  - Markdown images become plain links (nothing is fetched);
//  - DOMPurify then removes anything dangerous that is left, only http(s),
//    mailto and #fragment links survive, and links open with rel="noopener noreferrer";
//  - the page's CSP (script-src 'self', Trusted Types) is the last line.
import { Marked } from '../vendor/marked/marked.esm.js';
import DOMPurify from '../vendor/dompurify/purify.es.js';

const SAFE_LINK = /^(?:https?:|mailto:|#)/i;

const FORBIDDEN_TAGS = [
  'img', 'image', 'picture', 'source', 'video', 'audio', 'track', 'iframe', 'frame',
  'object', 'embed', 'style', 'link', 'meta', 'base', 'form', 'input', 'button',
  'textarea', 'select', 'option', 'dialog', 'template', 'svg', 'math',
];

const PURIFY_CONFIG = {
  RETURN_DOM_FRAGMENT: true,
  USE_PROFILES: { html: true },
  FORBID_TAGS: FORBIDDEN_TAGS,
  FORBID_ATTR: ['style', 'srcset', 'id', 'name', 'formaction', 'action', 'background', 'poster'],
  ALLOW_DATA_ATTR: false,
  ALLOWED_URI_REGEXP: SAFE_LINK,
};

export function escapeHtml(text) {
  return String(text)
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html({ text, block }) {
      const escaped = escapeHtml(text);
      return block ? `<p>${escaped}</p>` : escaped;
    },
    image({ href, text }) {
      const label = escapeHtml(text || 'image');
      if (href && /^https?:/i.test(href)) {
        return `<a href="${escapeHtml(href)}">${label} (image)</a>`;
      }
      return label;
    },
  },
});

DOMPurify.addHook('uponSanitizeAttribute', (node, data) => {
  if (data.attrName === 'class' && !/^language-[\w+#.-]+$/.test(data.attrValue)) {
    data.keepAttr = false;
  }
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName !== 'A') return;
  const href = node.getAttribute('href');
  if (!href || !SAFE_LINK.test(href.trim())) {
    node.removeAttribute('href');
    return;
  }
  if (!href.startsWith('#')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

/** Markdown text → a safe DocumentFragment ready to append. */
export function renderMarkdown(text) {
  const html = marked.parse(String(text ?? ''));
  return DOMPurify.sanitize(html, PURIFY_CONFIG);
}

/** Replace `element`'s children with the rendered Markdown. */
export function setMarkdown(element, text) {
  element.replaceChildren(renderMarkdown(text));
}
