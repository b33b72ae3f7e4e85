"""`Library`: the data sources as the app holds them.

The names come from the settings at once, so the `search_documents` tool can
be registered (and offered to the offline model) before the server starts;
`running()` opens the index when the server starts, brings it in step with
the folders then and every `LOOPWIRE_SOURCES_REFRESH_S` in a task of its own
task group (never detached), and closes it when the server stops. A search
before the index is open is a tool error that says so; after, it finds what
is indexed so far (the index file outlives restarts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.aio import stop_if_cancelled
from backend.errors import ToolError
from backend.settings import Settings
from backend.tools.base import Tool

if TYPE_CHECKING:  # the index and its readers: loaded once sources are named
    from backend.sources.data_sources import DataSources
    from backend.sources.ranking import Hit
    from backend.sources.refresh import RefreshReport

log = logging.getLogger(__name__)


class Library:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._names = tuple(settings.data_source_folders)
        self.sources: DataSources | None = None
        self.reports: dict[str, RefreshReport] = {}
        """The latest refresh of each source."""
        self.ready = asyncio.Event()
        """Set once every source has been refreshed since the server started."""

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def tool(self) -> Tool[Any]:
        from backend.sources.tool import search_documents_tool

        return search_documents_tool(
            self,
            finalize=self.settings.search_finalize,
            max_chars=self.settings.tool_result_max_chars,
        )

    async def search(
        self, query: str, sources: Sequence[str] | None = None, limit: int = 5
    ) -> list[Hit]:
        if self.sources is None:
            raise ToolError(
                "the data sources are not open yet (the server is starting); "
                "try again in a moment",
                retryable=True,
            )
        return await self.sources.search(query, sources, limit)

    async def document(self, source: str, path: str) -> Path | None:
        """The file of an indexed document (None: not one, or not open yet)."""
        if self.sources is None or source not in self._names:
            return None
        return await self.sources.document(source, path)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Library]:
        """Open the index and keep it fresh while the server runs."""
        from backend.sources.data_sources import open_sources

        self.sources = await open_sources(self.settings)
        if self.sources is None:
            yield self
            return
        try:
            async with asyncio.TaskGroup() as tasks:
                keeper = tasks.create_task(self._keep_fresh(self.sources))
                try:
                    yield self
                finally:
                    keeper.cancel()
        finally:
            sources, self.sources = self.sources, None
            await sources.aclose()

    async def _keep_fresh(self, sources: DataSources) -> None:
        while True:
            try:
                for report in await sources.refresh_all():
                    self._note(report)
            except Exception:  # a refresh that failed is tried again later
                stop_if_cancelled()
                log.exception("data sources: the refresh failed")
            self.ready.set()
            await asyncio.sleep(self.settings.sources_refresh_s)

    def _note(self, report: RefreshReport) -> None:
        changed = report.added or report.updated or report.removed
        if changed or report.refused or report.source not in self.reports:
            log.info(
                "data source %s: %d added, %d updated, %d removed, %d unchanged, "
                "%d refused (%.2f s)",
                report.source,
                report.added,
                report.updated,
                report.removed,
                report.unchanged,
                len(report.refused),
                report.seconds,
            )
        for problem in report.refused:
            log.warning(
                "data source %s: %s not indexed: %s",
                report.source,
                problem.path,
                problem.message,
            )
        self.reports[report.source] = report
