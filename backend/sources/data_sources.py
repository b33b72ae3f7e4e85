"""The configured data sources: their index and their tool, in one object.

`open_sources(settings)` is the entry point the app wires in: None when
`LOOPWIRE_DATA_SOURCES` names no folder; else a `DataSources` whose index
is open (and in step with the folders after `refresh_all()`), whose
`tool()` is `search_documents`, and which `aclose()` closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from backend.errors import ConfigError
from backend.settings import Settings
from backend.sources.documents import Problem
from backend.sources.embeddings import Embedder
from backend.sources.index import SourceIndex
from backend.sources.ranking import Hit
from backend.sources.refresh import Limits, RefreshReport
from backend.sources.tool import (
    DEFAULT_MAX_CHARS,
    SearchDocumentsArgs,
    search_documents_tool,
)
from backend.tools.base import Tool

MEMORY = ":memory:"


class DataSources:
    def __init__(
        self,
        index: SourceIndex,
        *,
        finalize: bool = False,
        max_result_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        self.index = index
        self.finalize = finalize
        self.max_result_chars = max_result_chars

    @property
    def names(self) -> tuple[str, ...]:
        return self.index.names

    def tool(self) -> Tool[SearchDocumentsArgs]:
        """`search_documents` over these sources (a new `Tool` each call)."""
        return search_documents_tool(
            self.index, finalize=self.finalize, max_chars=self.max_result_chars
        )

    async def refresh(self, name: str) -> RefreshReport:
        return await self.index.refresh(name)

    async def refresh_all(self) -> list[RefreshReport]:
        """Each source brought in step with its folder, in turn: only files
        changed since the last refresh are read."""
        return await self.index.refresh_all()

    async def search(
        self, query: str, sources: Sequence[str] | None = None, limit: int = 5
    ) -> list[Hit]:
        return await self.index.search(query, sources, limit)

    async def problems(self, name: str) -> list[Problem]:
        return await self.index.problems(name)

    async def document(self, name: str, path: str) -> Path | None:
        return await self.index.document(name, path)

    async def aclose(self) -> None:
        await self.index.aclose()


async def open_sources(
    settings: Settings, *, embedder: Embedder | None = None
) -> DataSources | None:
    """The data sources of `settings`, their index open (not refreshed yet);
    None when there are none. A `ConfigError` names a folder that is missing.

    `embedder` replaces the one `LOOPWIRE_EMBEDDINGS_MODEL` would make."""
    folders = settings.data_source_folders
    if not folders:
        return None
    path = await asyncio.to_thread(_prepare, folders, settings.sources_index)
    if embedder is None and settings.embeddings_model:
        embedder = _embedder(settings)
    limits = Limits(
        max_file_bytes=settings.sources_max_file_bytes,
        max_files=settings.sources_max_files,
    )
    try:
        index = await SourceIndex.open(path, folders, limits=limits, embedder=embedder)
    except BaseException:
        if embedder is not None:
            await embedder.aclose()
        raise
    return DataSources(
        index,
        finalize=settings.search_finalize,
        max_result_chars=settings.tool_result_max_chars,
    )


def _prepare(folders: dict[str, Path], location: str) -> str | Path:
    """Check that each folder is one; make the index file's folder; where
    the index is."""
    for name, folder in folders.items():
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "does not exist"
            raise ConfigError(
                f"LOOPWIRE_DATA_SOURCES: the folder of {name!r}, {folder}, {what}"
            )
    if location == MEMORY:
        return location
    path = Path(location).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _embedder(settings: Settings) -> Embedder:
    if not (settings.llm_base_url or settings.llm_api_key):
        raise ConfigError(
            "LOOPWIRE_EMBEDDINGS_MODEL is set, but neither LOOPWIRE_LLM_BASE_URL "
            "nor LOOPWIRE_LLM_API_KEY says which server embeds"
        )
    from backend.llm.openai_compat.embedder import (
        OpenAIEmbedder,
    )  # the SDK, when needed

    return OpenAIEmbedder(
        model=settings.embeddings_model,
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key,
        timeout_s=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
    )
