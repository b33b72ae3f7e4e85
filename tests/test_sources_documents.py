"""Reading documents into blocks (Markdown, text, HTML, PDF) and packing
them into passages with locations people understand."""

# ruff: noqa: RUF001 (locations are written with a guillemet and an en dash)

from __future__ import annotations

from backend.sources.documents import Block, Document
from backend.sources.passages import MAX_CHARS, Passage, split_passages
from backend.sources.readers import parse_document
from tests.pdf_files import pdf_bytes

MARKDOWN = """\
---
title: not a heading
---
# Kestrel *guide*

Intro line.

Setup
-----

Install it.
Then run it.

```sh
# not a heading
kestrel serve
```

### Installing [the package](https://example.com)

pip install kestrel
***
After the rule.

## Ports ##

Port 8080.
"""


def test_markdown_blocks_keep_their_heading_path_and_lines() -> None:
    """Markdown blocks keep their heading path and lines; front matter is skipped."""
    document = parse_document("markdown", MARKDOWN.encode(), name="docs/guide.md")
    assert document.title == "Kestrel guide"
    assert document.blocks == (
        Block("Intro line.", ("Kestrel guide",), 6, 6),
        Block("Install it.\nThen run it.", ("Kestrel guide", "Setup"), 11, 12),
        Block("# not a heading\nkestrel serve", ("Kestrel guide", "Setup"), 15, 16),
        Block(
            "pip install kestrel",
            ("Kestrel guide", "Setup", "Installing the package"),
            21,
            21,
        ),
        Block(
            "After the rule.",
            ("Kestrel guide", "Setup", "Installing the package"),
            23,
            23,
        ),
        Block("Port 8080.", ("Kestrel guide", "Ports"), 27, 27),
    )
    assert [p.location for p in split_passages(document)] == [
        "Kestrel guide",
        "Kestrel guide › Setup",
        "Kestrel guide › Setup › Installing the package",
        "Kestrel guide › Ports",
    ]


def test_text_paragraphs_keep_their_lines_and_encodings_are_read() -> None:
    """Text paragraphs keep their line span, and cp1252 or a BOM decode cleanly."""
    text = "First line.\nSecond line.\n\n\nThird, alone.\n"
    document = parse_document("text", text.encode(), name="notes/todo.txt")
    assert document == Document(
        "text",
        "todo",
        (
            Block("First line.\nSecond line.", (), 1, 2),
            Block("Third, alone.", (), 5, 5),
        ),
    )
    assert split_passages(document) == [
        Passage(0, "First line.\nSecond line.\n\nThird, alone.", "lines 1–5", "")
    ]
    latin = parse_document("text", "Café crème".encode("cp1252"), name="menu.txt")
    assert latin.blocks[0].text == "Café crème"
    bom = parse_document("text", b"\xef\xbb\xbfBOM first", name="bom.txt")
    assert bom.blocks[0].text == "BOM first"


HTML = """<!doctype html><html><head><title>Kestrel &amp; friends</title>
<style>p { color: red }</style><script>alert("no")</script></head>
<body><nav><a href="/">Home</a> | <a href="/docs">Docs</a></nav>
<p>Before any   heading,
   wrapped in the source.</p>
<h1>Guide</h1><h2>Setup</h2>
<p>Install it.<br/>Then run it &lt;now&gt;.</p>
<pre>line one
    indented line</pre>
<h3>Tables</h3><table><tr><th>Key</th><th>Value</th></tr>
<tr><td>port</td><td>8080</td></tr></table>
<h2>Help</h2><ul><li>Ask</li><li>Read</li></ul><img src="x.png" alt="ignored">
</body></html>"""


def test_html_text_is_what_a_reader_sees_under_its_headings() -> None:
    """HTML yields only visible text, whitespace-normalised, under its headings."""
    document = parse_document("html", HTML.encode(), name="site/index.html")
    assert document.title == "Kestrel & friends"
    assert [(b.text, b.headings) for b in document.blocks] == [
        ("Before any heading, wrapped in the source.", ()),
        ("Install it.\nThen run it <now>.", ("Guide", "Setup")),
        ("line one\n    indented line", ("Guide", "Setup")),
        ("Key Value", ("Guide", "Setup", "Tables")),
        ("port 8080", ("Guide", "Setup", "Tables")),
        ("Ask", ("Guide", "Help")),
        ("Read", ("Guide", "Help")),
    ]
    assert [p.location for p in split_passages(document)] == [
        "start",
        "Guide › Setup",
        "Guide › Setup › Tables",
        "Guide › Help",
    ]


def test_pdf_pages_are_the_locations() -> None:
    """Each PDF page is a block located by page, titled by metadata or file name."""
    data = pdf_bytes(["Page one text.", "Page two.\nA second line."], title="T")
    document = parse_document("pdf", data, name="manual.pdf")
    assert document == Document(
        "pdf",
        "T",
        (
            Block("Page one text.", (), 1, 1),
            Block("Page two.\nA second line.", (), 2, 2),
        ),
    )
    assert [(p.text, p.location) for p in split_passages(document)] == [
        ("Page one text.", "page 1"),
        ("Page two.\nA second line.", "page 2"),
    ]
    untitled = parse_document("pdf", pdf_bytes(["x"]), name="docs/manual.pdf")
    assert untitled.title == "manual"


def test_long_text_is_packed_into_bounded_passages_with_their_lines() -> None:
    """Long text packs into passages within `MAX_CHARS`, each with its line range."""
    sentence = "The quick brown fox jumps over the lazy dog again and again."  # 60
    lines = [f"{number:02d} {sentence}" for number in range(1, 41)]  # 63 chars each
    paragraphs = "\n".join(lines[:20]) + "\n\n" + "\n".join(lines[20:])
    document = parse_document("text", paragraphs.encode(), name="fox.txt")
    passages = split_passages(document)
    assert [p.location for p in passages] == [
        "lines 1–15",
        "lines 16–20",
        "lines 22–36",
        "lines 37–41",
    ]
    assert all(len(p.text) <= MAX_CHARS for p in passages)
    assert passages[0].text == "\n".join(lines[:15])
    assert passages[2].text.startswith("21 The quick")


def test_a_line_longer_than_a_passage_is_cut_between_words() -> None:
    """An over-long line is split at word breaks, or hard-cut when it has none."""
    words = " ".join(f"word{n:04d}" for n in range(300))  # 2,699 chars, one line
    # 111 words of 8 letters fit in a passage: 111 * 9 - 1 = 998 characters
    giant = "x" * 2500
    document = parse_document("text", f"{words}\n{giant}\n".encode(), name="w.txt")
    passages = split_passages(document)
    assert [len(p.text) for p in passages] == [998, 998, 701, 1000, 1000, 500]
    assert [p.location for p in passages] == [
        "line 1",
        "line 1",
        "line 1",
        "line 2",
        "line 2",
        "line 2",
    ]
    assert " ".join(p.text for p in passages[:3]) == words
