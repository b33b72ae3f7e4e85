// Tiny DOM helpers. Text always goes in through text nodes, never as HTML.

const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * h('div', {class: 'x', text: 'hi', dataset: {id: '1'}}, child, 'text', ...)
 * Strings become text nodes; null/false children and attributes are skipped.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'text') el.textContent = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

export function append(parent, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
  return parent;
}

const ICONS = {
  check: ['M5 12.5l4.2 4.2L19 7'],
  cross: ['M7 7l10 10M17 7L7 17'],
  stop: ['M8 8h8v8H8z'],
  tool: ['M14.7 6.3a4 4 0 0 0-5.4 5.1L4.6 16a1.9 1.9 0 0 0 2.7 2.7l4.7-4.7a4 4 0 0 0 5.1-5.4l-2.4 2.4-2.2-.5-.5-2.2z'],
  question: ['M9.6 9.3a2.5 2.5 0 1 1 3.4 2.3c-.7.3-1 .9-1 1.6v.3', 'M12 16.8v.2'],
  alert: ['M12 4l9 16H3z', 'M12 10v4', 'M12 17v.2'],
  info: ['M12 11v6', 'M12 7.5v.2'],
  shield: ['M12 3l7 3v5c0 4.5-3 8.3-7 10-4-1.7-7-5.5-7-10V6z'],
  plus: ['M12 6v12M6 12h12'],
  pencil: ['M4 20h4L19 9l-4-4L4 16z', 'M13.5 6.5l4 4'],
  trash: ['M5 7h14', 'M10 11v6M14 11v6', 'M7 7l1 12h8l1-12', 'M9 7V4h6v3'],
  download: ['M12 4v11', 'M7.5 10.5L12 15l4.5-4.5', 'M5 19h14'],
  menu: ['M4 7h16M4 12h16M4 17h16'],
  copy: ['M9 9h10v10H9z', 'M5 15V5h10'],
  file: ['M7 3h7l4 4v14H7z', 'M14 3v4h4'],
  clip: ['M16.5 7.5l-7 7a2 2 0 0 0 2.8 2.8l7.4-7.4a4 4 0 0 0-5.7-5.7L6.6 11.6a6 6 0 0 0 8.5 8.5L20 15.2'],
  retry: ['M4 12a8 8 0 1 0 2.3-5.6', 'M4 4v4h4'],
  bulb: ['M9 18h6', 'M10 21h4', 'M12 3a6 6 0 0 0-3.6 10.8c.7.6 1.1 1.3 1.1 2.2h5c0-.9.4-1.6 1.1-2.2A6 6 0 0 0 12 3z'],
  loop: ['M7 7a5 5 0 1 0 0 10c2.2 0 3.6-1.6 5-5s2.8-5 5-5a5 5 0 1 1 0 10c-2.2 0-3.6-1.6-5-5S9.2 7 7 7z'],
};

/** A small stroked icon, decorative (hidden from assistive technology). */
export function icon(name, extraClass = '') {
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  svg.setAttribute('class', `icon icon-${name} ${extraClass}`.trim());
  if (name === 'info' || name === 'question') {
    const circle = document.createElementNS(SVG_NS, 'circle');
    circle.setAttribute('cx', '12');
    circle.setAttribute('cy', '12');
    circle.setAttribute('r', '9');
    svg.append(circle);
  }
  for (const d of ICONS[name] ?? []) {
    const path = document.createElementNS(SVG_NS, 'path');
    path.setAttribute('d', d);
    svg.append(path);
  }
  return svg;
}

export function spinner() {
  return h('span', { class: 'spinner', 'aria-hidden': 'true' });
}

export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`missing #${id} in the page`);
  return el;
}
