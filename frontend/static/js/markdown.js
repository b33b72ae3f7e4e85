// Model output → a sanitised DocumentFragment. Nothing here ever runs script or
// loads a remote resource:
//  - raw HTML in the Markdown is escaped (shown as text), never interpreted;
//  - Markdown images become plain links (nothing is fetched);
//  - DOMPurify then removes anything dangerous that is left, only http(s),
//    mailto and #fragment links survive, and links open with rel="noopener noreferrer";
//  - the page's CSP (script-src 'self', Trusted Types) is the last line.
// Fenced code with a language highlight.js knows is highlighted (its spans
// go through DOMPurify with the rest: only its `hljs…` classes are kept).
import { Marked } from '../vendor/marked/marked.esm.js';
import DOMPurify from '../vendor/dompurify/purify.es.js';
import hljs from '../vendor/highlight/highlight.min.js';

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
  // a table column's alignment (left, right or center only: see the hook);
  // URI-safe, or its value would be held to ALLOWED_URI_REGEXP and dropped
  ADD_ATTR: ['align'],
  ADD_URI_SAFE_ATTR: ['align'],
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
    code({ text, lang }) {
      const language = String(lang ?? '').trim().split(/\s+/)[0].toLowerCase();
      if (language && hljs.getLanguage(language)) {
        const { value } = hljs.highlight(text, { language, ignoreIllegals: true });
        return `<pre><code class="hljs language-${escapeHtml(language)}">${value}</code></pre>\n`;
      }
      const kind = /^[\w+#.-]+$/.test(language) ? ` class="language-${language}"` : '';
      return `<pre><code${kind}>${escapeHtml(text)}</code></pre>\n`;
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

/** A class the renderer gave: a code block's language, or highlight.js's. */
const OUR_CLASS = /^(?:language-[\w+#.-]+|hljs(?:-[\w-]+)?|[a-z]+_+)$/;

DOMPurify.addHook('uponSanitizeAttribute', (node, data) => {
  if (data.attrName === 'class' && !data.attrValue.split(/\s+/).every((name) => OUR_CLASS.test(name))) {
    data.keepAttr = false;
  }
  if (data.attrName === 'align' && !(/^(?:left|right|center)$/.test(data.attrValue) && /^T[HD]$/.test(node.tagName))) {
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
