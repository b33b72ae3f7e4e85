"""Where a control really is on screen: inside the viewport, not clipped by
a scrolling or clipping ancestor, and the element a click at its centre
reaches (nothing drawn over it)."""

from __future__ import annotations

from playwright.async_api import Locator, Page

WHY_NOT_CLICKABLE = """(element) => {
  const box = element.getBoundingClientRect();
  const problems = [];
  const width = window.innerWidth, height = window.innerHeight;
  const where = (r) => `${Math.round(r.left)},${Math.round(r.top)} ${Math.round(r.width)}x${Math.round(r.height)}`;
  if (box.width < 1 || box.height < 1) problems.push(`no size (${where(box)})`);
  if (box.left < 0 || box.top < 0 || box.right > width || box.bottom > height) {
    problems.push(`outside the ${width}x${height} viewport (${where(box)})`);
  }
  for (let outer = element.parentElement; outer; outer = outer.parentElement) {
    const style = getComputedStyle(outer);
    if (style.overflowX === 'visible' && style.overflowY === 'visible') continue;
    const clip = outer.getBoundingClientRect();
    const inside = box.left >= clip.left - 0.5 && box.top >= clip.top - 0.5
      && box.right <= clip.right + 0.5 && box.bottom <= clip.bottom + 0.5;
    if (!inside) problems.push(`clipped by <${outer.tagName.toLowerCase()} id="${outer.id}"> (${where(clip)})`);
  }
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  if (hit !== element && !element.contains(hit)) {
    problems.push(`its centre shows <${hit?.tagName.toLowerCase()} id="${hit?.id}" class="${hit?.className}">`);
  }
  return problems;
}"""


SETTLE_FRAMES = 30
"""How many animation frames a control may take to settle where it goes
(a list re-rendered, a drawer sliding in) before what is wrong is reported."""


async def why_not_clickable(control: Locator) -> list[str]:
    """What keeps `control` from being seen and clicked where it is (none:
    fine), once the page has drawn `SETTLE_FRAMES` frames without it
    settling; the element is looked up afresh each frame (a re-rendered
    list replaces its rows)."""
    problems: list[str] = await control.evaluate(WHY_NOT_CLICKABLE)
    for _ in range(SETTLE_FRAMES):
        if not problems:
            break
        await control.page.evaluate(NEXT_FRAME)
        problems = await control.evaluate(WHY_NOT_CLICKABLE)
    return problems


NEXT_FRAME = "() => new Promise((drawn) => requestAnimationFrame(() => drawn()))"


PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
SIZES = (PHONE, DESKTOP)
"""The sizes a control is checked at, the desktop's last."""


async def click_at_both_sizes(page: Page, control: Locator) -> None:
    """Click `control` once it is in view, unclipped and itself at its
    centre on a phone and then on a desktop (the page stays at the
    desktop's size)."""
    for size in SIZES:
        await page.set_viewport_size(size)  # type: ignore[arg-type]
        await control.scroll_into_view_if_needed()
        assert await why_not_clickable(control) == [], size
    await control.click()
