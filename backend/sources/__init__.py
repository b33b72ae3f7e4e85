"""Data sources: folders of documents, indexed for retrieval, searched by
the `search_documents` tool.

    sources = await open_sources(settings)      # None: none configured
    if sources is not None:
        await sources.refresh_all()              # reads only what changed
        registry.add(sources.tool())
        ...
        await sources.aclose()

| module | what |
| --- | --- |
| `data_sources.py` | `open_sources`, `DataSources`: the entry point |
| `folders.py` | walking a source's folder: links, types, limits |
| `documents.py` | one file into blocks (Markdown, text); `DocumentRefused`, reasons |
| `html_pages.py`, `pdfs.py` | HTML (stdlib parser) and PDF (pypdf, bombs refused) |
| `readers.py` | which files are documents (`KINDS`), and each kind's reader |
| `passages.py` | blocks into passages with locations people read |
| `query.py` | user words into a safe FTS5 query |
| `index.py` | `SourceIndex`: the handle (open, refresh, documents, problems, search) |
| `schema.py` | the SQLite file: tables, schema version, its one thread (`Database`) |
| `refresh.py` | a source in step with its folder, incrementally; `RefreshReport` |
| `ranking.py` | BM25 hits, and `rrf_fuse` (reciprocal rank fusion) |
| `vectors.py` | passages and queries embedded, stored, compared by cosine |
| `embeddings.py` | `Embedder`, the seam, and vector packing |
| `tool.py`, `skill.py` | the tool, and what it teaches the offline model |
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backend.sources.data_sources import DataSources, open_sources
    from backend.sources.documents import DocumentRefused, Problem
    from backend.sources.index import SourceIndex, UnknownSource
    from backend.sources.ranking import Hit
    from backend.sources.refresh import RefreshReport

EXPORTS = {
    "DataSources": "data_sources",
    "open_sources": "data_sources",
    "DocumentRefused": "documents",
    "Problem": "documents",
    "SourceIndex": "index",
    "UnknownSource": "index",
    "Hit": "ranking",
    "RefreshReport": "refresh",
}
"""Each name this package offers, and its module: imported when the name is
first asked for, so a server without data sources (which only needs
`links` and `library`) never loads the index, the readers or SQLite FTS."""

__all__ = [
    "DataSources",
    "DocumentRefused",
    "Hit",
    "Problem",
    "RefreshReport",
    "SourceIndex",
    "UnknownSource",
    "open_sources",
]


def __getattr__(name: str) -> Any:
    module = EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
