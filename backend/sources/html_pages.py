"""HTML pages as text: the stdlib's `html.parser`, no rendering.

What a reader sees of the page is kept: paragraphs (every block element
ends one), list items, table rows, preformatted text as it is; headings
(`h1` to `h6`) become the structure the blocks sit under, `<title>` the
document's title. Scripts, styles and other content nobody reads are
skipped, and nothing is ever fetched.
"""

from __future__ import annotations

from html.parser import HTMLParser

from backend.sources.documents import Block, Document

SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "math", "nav"})
BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "tr",
        "ul",
    }
)
HEADINGS = {f"h{level}": level for level in range(1, 7)}
CELLS = frozenset({"td", "th"})
BREAK = "\x0b"
"""What a `<br>` leaves in a paragraph's text until it is a line break."""


def read_html(text: str, *, default_title: str) -> Document:
    page = _PageText()
    page.feed(text)
    page.close()
    page.end_paragraph()
    title = page.title_text() or page.first_heading or default_title
    return Document("html", title, tuple(page.blocks))


class _PageText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.first_heading = ""
        self._skipping: list[str] = []
        self._headings: list[tuple[int, str]] = []
        self._heading: tuple[int, list[str]] | None = None
        self._title: list[str] | None = None
        self._title_parts: list[str] = []
        self._paragraph: list[str] = []
        self._pre = 0

    def title_text(self) -> str:
        return " ".join("".join(self._title_parts).split())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skipping or tag in SKIPPED:
            if tag in SKIPPED:
                self._skipping.append(tag)
            return
        if tag == "title":
            self._title = self._title_parts
        elif tag in HEADINGS:
            self.end_paragraph()
            self._heading = (HEADINGS[tag], [])
        elif tag == "br":
            self._text(BREAK)
        elif tag in CELLS:
            self._text(" ")
        elif tag in BLOCKS:
            self.end_paragraph()
            if tag == "pre":
                self._pre += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED:
            return  # <script/>: nothing to skip
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self._skipping:
            if tag == self._skipping[-1]:
                self._skipping.pop()
            return
        if tag == "title":
            self._title = None
        elif tag in HEADINGS and self._heading is not None:
            self._end_heading()
        elif tag in BLOCKS:
            self.end_paragraph()
            if tag == "pre" and self._pre:
                self._pre -= 1

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._title is not None:
            self._title.append(data)
        else:
            self._text(data)

    def _text(self, data: str) -> None:
        if self._heading is not None:
            self._heading[1].append(data)
        else:
            self._paragraph.append(data)

    def _end_heading(self) -> None:
        assert self._heading is not None
        level, parts = self._heading
        self._heading = None
        words = " ".join("".join(parts).split())
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        if words:
            self._headings.append((level, words))
            self.first_heading = self.first_heading or words

    def end_paragraph(self) -> None:
        if self._heading is not None:
            self._end_heading()
        raw = "".join(self._paragraph)
        self._paragraph.clear()
        if self._pre:
            text = raw.replace(BREAK, "\n").strip("\n")
        else:
            lines = (" ".join(line.split()) for line in raw.split(BREAK))
            text = "\n".join(line for line in lines if line)
        if text.strip():
            headings = tuple(words for _, words in self._headings)
            self.blocks.append(Block(text, headings))
