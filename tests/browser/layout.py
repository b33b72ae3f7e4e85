"""The whole page's layout, checked as a person sees it.

`layout_problems(page)` looks at every visible interactive element (buttons,
links, fields, anything focusable or with a button role) and at every
element that scrolls or clips, and reports, in words:

- an element outside the viewport, or outside the visible part of a
  container that clips it (a scrolling list may hold rows scrolled out of
  view vertically: those are checked only where they can be seen; a row
  pushed out sideways is never fine);
- an element in view whose centre shows something else (drawn over);
- a container that scrolls sideways without saying so (`data-scrolls-x`
  on it: a toolbar meant to scroll), or text cut without an ellipsis.

A test asserts the list is empty, so a button pushed out of its sidebar, a
chip hidden off-screen or a title cut mid-word fails it.
"""

from __future__ import annotations

from playwright.async_api import Page

LAYOUT_PROBLEMS = """() => {
  const problems = [];
  const width = window.innerWidth, height = window.innerHeight;
  const where = (r) => `${Math.round(r.left)},${Math.round(r.top)} ${Math.round(r.width)}x${Math.round(r.height)}`;
  const name = (el) => {
    const label = el.getAttribute('aria-label') || el.textContent || el.getAttribute('placeholder') || el.value || '';
    const id = el.id ? `#${el.id}` : '';
    const cls = typeof el.className === 'string' && el.className ? `.${el.className.trim().split(/\\s+/).join('.')}` : '';
    return `<${el.tagName.toLowerCase()}${id}${cls}> "${label.trim().replace(/\\s+/g, ' ').slice(0, 40)}"`;
  };
  const shown = (el) => {
    if (el.closest('[hidden], [inert], [aria-hidden="true"]')) return false;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none') return false;
    for (let d = el.parentElement?.closest('details'); d; d = d.parentElement?.closest('details')) {
      if (!d.open && !el.closest('summary')) return false;
    }
    const dialog = el.closest('dialog');
    if (dialog && !dialog.open) return false;
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  };
  const modal = document.querySelector('dialog[open]:modal');
  const interactive = [...document.querySelectorAll(
    'button, a[href], input:not([type=hidden]), select, textarea, summary, [role=button], [role=switch], [role=tab], [tabindex]:not([tabindex="-1"])'
  )].filter(shown).filter((el) => !modal || modal.contains(el));
  for (const el of interactive) {
    const box = el.getBoundingClientRect();
    let visible = { left: 0, top: 0, right: width, bottom: height };
    let sideways = false;
    for (let outer = el.parentElement; outer; outer = outer.parentElement) {
      const style = getComputedStyle(outer);
      if (style.overflowX === 'visible' && style.overflowY === 'visible') continue;
      const clip = outer.getBoundingClientRect();
      if (box.left < clip.left - 0.5 || box.right > clip.right + 0.5) {
        sideways = true;
        problems.push(`${name(el)} sticks out sideways from <${outer.tagName.toLowerCase()}${outer.id ? '#' + outer.id : ''}> (${where(box)} in ${where(clip)})`);
        break;
      }
      visible = {
        left: Math.max(visible.left, clip.left), top: Math.max(visible.top, clip.top),
        right: Math.min(visible.right, clip.right), bottom: Math.min(visible.bottom, clip.bottom),
      };
    }
    if (sideways) continue;
    if (box.left < -0.5 || box.right > width + 0.5) {
      problems.push(`${name(el)} is outside the ${width}px wide viewport (${where(box)})`);
      continue;
    }
    const seen = box.top >= visible.top - 0.5 && box.bottom <= visible.bottom + 0.5;
    if (!seen) continue;  // scrolled out of view in its list: fine
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    if (hit !== el && !el.contains(hit) && !(el.tagName === 'INPUT' && el.labels && [...el.labels].some((l) => l.contains(hit)))) {
      problems.push(`${name(el)}: its centre shows ${hit ? name(hit) : 'nothing'}`);
    }
  }
  for (const el of document.querySelectorAll('body *')) {
    if (!shown(el)) continue;
    const size = el.getBoundingClientRect();
    if (size.width <= 2 || size.height <= 2) continue;  // for screen readers only
    if (modal && !modal.contains(el)) continue;
    const style = getComputedStyle(el);
    const scrollsX = (style.overflowX === 'auto' || style.overflowX === 'scroll') && el.scrollWidth > el.clientWidth + 1;
    if (scrollsX && !el.closest('[data-scrolls-x]') && !['PRE', 'CODE', 'TEXTAREA', 'TABLE'].includes(el.tagName) && !el.closest('pre, table, .table-wrap')) {
      problems.push(`${name(el)} scrolls sideways (${el.scrollWidth}px in ${el.clientWidth}px) without showing that it does`);
    }
    const clipsX = style.overflowX === 'hidden' || style.overflowX === 'clip';
    const textOnly = el.children.length === 0 && (el.textContent || '').trim().length > 0;
    if (clipsX && textOnly && el.scrollWidth > el.clientWidth + 1 && style.textOverflow !== 'ellipsis' && !['INPUT', 'TEXTAREA'].includes(el.tagName)) {
      problems.push(`${name(el)} cuts its text without an ellipsis`);
    }
  }
  return problems;
}"""


SETTLED = """async () => {
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  const ending = document.getAnimations().filter(
    (a) => a.effect && a.effect.getComputedTiming().endTime !== Infinity);
  await Promise.all(ending.map((a) => a.finished.catch(() => null)));
}"""
"""Resolves once the transitions under way have ended (a resize from the
desktop to the phone layout slides the sidebar out over 180 ms); endless
animations, such as a spinner's, are not waited for."""


async def layout_problems(page: Page) -> list[str]:
    """What a person would find wrong with the page's layout (none: fine),
    looked at once the page has come to rest."""
    await page.evaluate(SETTLED)
    problems: list[str] = await page.evaluate(LAYOUT_PROBLEMS)
    return problems
