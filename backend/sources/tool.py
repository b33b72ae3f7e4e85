"""The `search_documents` tool: passages of the data sources, with where
each comes from.

Read-only and idempotent, and it `cites`: the run keeps the passages it
returns as the answer's sources. It searches the sources the model names,
within those the conversation chose (`ToolContext.data_sources`, from
`chat.selected_data_sources`), else all those chosen. A `finalize` tool
when configured (`LOOPWIRE_SEARCH_FINALIZE`): then its result's `summary`,
which lists the passages found with their source, file and location, is
the run's answer.
The result fits what the loop shows the model of a tool result
(`LOOPWIRE_TOOL_RESULT_MAX_CHARS`, as JSON): the passages' text is cut
shorter until it does, so the model always gets whole, parseable JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, Field

from backend.errors import ToolError
from backend.sources.index import UnknownSource
from backend.sources.ranking import Hit
from backend.sources.skill import SearchDocumentsSkill
from backend.tools.base import Tool, ToolContext, ToolEffect
from backend.tools.results import to_json_text

NAME = "search_documents"
MAX_PASSAGE_CHARS = 600
MIN_PASSAGE_CHARS = 60
"""Of each passage's text, however small the result must be."""
DEFAULT_MAX_CHARS = 4000
EXCERPT_CHARS = 160
"""Of each of the first `EXCERPTS` passages, in the summary."""
EXCERPTS = 3
MAX_QUERY_CHARS = 500
ORIGIN_PATHS = 3
"""Files named in an approval request's account of what a search read."""


class Searcher(Protocol):
    """What the tool searches (a `SourceIndex`)."""

    @property
    def names(self) -> tuple[str, ...]: ...

    async def search(
        self, query: str, sources: Sequence[str] | None = None, limit: int = 5
    ) -> list[Hit]: ...


class SearchDocumentsArgs(BaseModel):
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What to look for: the user's question, or its key words.",
    )
    sources: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=50,
        description="The data sources to search, by name; omit to search them all.",
    )
    limit: int = Field(
        default=5, ge=1, le=10, description="How many passages to return (1-10)."
    )


def search_documents_tool(
    searcher: Searcher,
    *,
    finalize: bool = False,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> Tool[SearchDocumentsArgs]:
    """The tool over `searcher`; its results fit in `max_chars` as JSON."""
    names = searcher.names

    async def search_documents(
        args: SearchDocumentsArgs, ctx: ToolContext
    ) -> dict[str, Any]:
        sources = _allowed(args.sources, ctx.data_sources)
        try:
            hits = await searcher.search(args.query, sources, args.limit)
        except UnknownSource as exc:
            raise ToolError(str(exc)) from None
        wanted = set(sources or names)
        searched = [n for n in names if n in wanted]
        return search_result(args.query, searched, hits, max_chars=max_chars)

    listed = ", ".join(names)
    return Tool(
        NAME,
        f"Search the user's documents (data sources: {listed}) for passages about "
        "a question, best first, each with its source, file, location and score. "
        "Answer from the passages and cite the source and location of what you use.",
        SearchDocumentsArgs,
        search_documents,
        ToolEffect(read_only=True, idempotent=True, finalize=finalize),
        offline=SearchDocumentsSkill(names),
        summary=f"Searches your documents ({listed}) and cites what it finds.",
        origin=passages_origin,
        cites=True,
    )


def passages_origin(result: Any) -> str | None:
    """Where a search result's passages came from: their files, the first
    few by name (None: it found nothing)."""
    passages = result.get("passages", []) if isinstance(result, dict) else []
    paths = list(dict.fromkeys(f"{p['source']}/{p['path']}" for p in passages))
    if not paths:
        return None
    shown = ", ".join(paths[:ORIGIN_PATHS])
    more = len(paths) - ORIGIN_PATHS
    return f"{shown} and {more} more" if more > 0 else shown


def _allowed(
    asked: Sequence[str] | None, chosen: Sequence[str] | None
) -> Sequence[str] | None:
    """The sources to search: those asked for, within the run's chosen ones
    (`ToolContext.data_sources`; None: any)."""
    if chosen is None:
        return asked
    if asked is None:
        return chosen
    others = [name for name in dict.fromkeys(asked) if name not in chosen]
    if others:
        raise ToolError(
            f"data source(s) not chosen for this conversation: {', '.join(others)}; "
            f"chosen: {', '.join(chosen)}"
        )
    return asked


def search_result(
    query: str,
    searched: Sequence[str],
    hits: Sequence[Hit],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> dict[str, Any]:
    """The tool's JSON result: the passages, and a summary for people; each
    passage's text as long as `max_chars` of JSON allow (down to a floor)."""
    each = MAX_PASSAGE_CHARS
    while True:
        result = _result(query, searched, hits, each)
        if each <= MIN_PASSAGE_CHARS or len(to_json_text(result)) <= max_chars:
            return result
        each = max(MIN_PASSAGE_CHARS, each * 3 // 4)


def _result(
    query: str, searched: Sequence[str], hits: Sequence[Hit], each: int
) -> dict[str, Any]:
    return {
        "query": query,
        "sources": list(searched),
        "count": len(hits),
        "passages": [
            {
                "source": hit.source,
                "path": hit.path,
                "location": hit.location,
                "score": hit.score,
                "text": trimmed(hit.text, each),
            }
            for hit in hits
        ],
        "summary": summary(query, searched, hits),
    }


def summary(query: str, searched: Sequence[str], hits: Sequence[Hit]) -> str:
    """ "Found 2 passages in handbook for “…”:" and a line per passage."""
    asked = trimmed(" ".join(query.split()), 80)
    if not hits:
        return f"No passages in {_names(searched) or 'any source'} match “{asked}”."
    found = list(dict.fromkeys(hit.source for hit in hits))
    plural = "" if len(hits) == 1 else "s"
    lines = [f"Found {len(hits)} passage{plural} in {_names(found)} for “{asked}”:"]
    for number, hit in enumerate(hits):
        line = f"- {hit.source}/{hit.path}, {hit.location}"
        if number < EXCERPTS:
            line += f": “{trimmed(' '.join(hit.text.split()), EXCERPT_CHARS)}”"
        lines.append(line)
    return "\n".join(lines)


def trimmed(text: str, limit: int) -> str:
    """`text` of at most `limit` characters, cut between words with `…`."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[: max(0, limit - 1)]
    words = head.rsplit(None, 1)
    cut = words[0] if len(words) > 1 else head
    return cut.rstrip(" ,;:.\n") + "…"


def _names(names: Sequence[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"
