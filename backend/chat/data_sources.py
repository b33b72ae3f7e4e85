"""Which data sources a `chat` may search, and when it is a retrieval.

`selected_data_sources` names data sources of this server (the
`search_documents` tool searches only those in that run). A `chat` that
names some and asks for neither the agent loop, a strategy nor tools is the
plain retrieval ("RAG") mode: the `retrieve` strategy searches them for the
message and answers from the passages with citations.
"""

from __future__ import annotations

from collections.abc import Sequence

from backend.errors import InvalidMessage, client_names
from backend.protocol import ChatMessage

RETRIEVE = "retrieve"
SEARCH_TOOL = "search_documents"


def chosen_sources(
    message: ChatMessage, available: Sequence[str]
) -> tuple[str, ...] | None:
    """The data sources the run may search (None: all), or `InvalidMessage`."""
    wanted = message.selected_data_sources
    if wanted is None:
        return None
    if not available:
        raise InvalidMessage(
            "this server has no data sources (LOOPWIRE_DATA_SOURCES); "
            "send the message without selected_data_sources"
        )
    unknown = [name for name in wanted if name not in available]
    if unknown:
        names = client_names(unknown)
        raise InvalidMessage(
            f"unknown data source(s) in selected_data_sources: {names}; "
            f"available: {', '.join(available)}"
        )
    if not wanted:
        raise InvalidMessage(
            "selected_data_sources is empty; leave it out to search them all"
        )
    return tuple(dict.fromkeys(wanted))


def wants_retrieval(message: ChatMessage) -> bool:
    """Data sources named, and no agent loop, strategy or tools asked for."""
    return bool(message.selected_data_sources) and not (
        message.agent_mode or message.loop_strategy or message.selected_tools
    )


def with_search(selected: Sequence[str]) -> list[str]:
    """A run that names data sources is offered `search_documents` too."""
    return list(dict.fromkeys([*selected, SEARCH_TOOL]))
