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
| `documents.py` | reading one file into blocks; `DocumentRefused` and its reasons |
| `html_pages.py`, `pdfs.py` | HTML (stdlib parser) and PDF (pypdf, bombs refused) |
| `passages.py` | blocks into passages with locations people read |
| `query.py` | user words into a safe FTS5 query |
| `index.py` | `SourceIndex`: SQLite FTS5 + BM25, incremental refresh, hybrid |
| `embeddings.py` | `Embedder`, the OpenAI-compatible `/v1/embeddings` client |
| `tool.py`, `skill.py` | the tool, and what it teaches the offline model |
"""

from backend.sources.data_sources import DataSources, open_sources
from backend.sources.documents import DocumentRefused, Problem
from backend.sources.index import Hit, RefreshReport, SourceIndex, UnknownSource

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
