"""Where a cited document opens: the URL a citation carries
(`SourceRef.url`), served by `transport/source_documents.py`."""

from __future__ import annotations

from urllib.parse import quote

PREFIX = "/api/sources"


def document_url(source: str, path: str, location: str = "") -> str:
    """The document `path` of `source`, relative to the server (a PDF at
    its page, for a location such as `page 3`)."""
    url = f"{PREFIX}/{quote(source, safe='')}/documents/{quote(path)}"
    page = location.removeprefix("page ").split(" ")[0]
    pdf = path.lower().endswith(".pdf")
    if pdf and location.startswith("page ") and page.isdigit():
        url += f"#page={page}"
    return url
