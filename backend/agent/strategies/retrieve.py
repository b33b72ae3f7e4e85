"""`retrieve`: search the user's documents, then answer from what was found.

The plain "RAG" mode: a `chat` that names data sources
(`selected_data_sources`) and asks for neither tools nor the agent loop.
The first phase calls `search_documents` itself, with the user's message as
the query, through the same tool machinery as any call (so the client sees
`tool_start` / `tool_complete` and the passages become the run's sources);
the second streams one answer that cites them. No step budget: two phases,
always in that order.
"""

from __future__ import annotations

import json

from backend.agent.kit import LoopKit
from backend.agent.loop import AgentContext, Continue, Decision, Final
from backend.agent.phases import PhasedStrategy
from backend.llm.base import Completion, ToolCall

SEARCH_TOOL = "search_documents"
QUERY_CHARS = 500
"""The tool takes a query of at most this many characters."""


class RetrieveThenAnswer(PhasedStrategy):
    name = "retrieve"
    description = (
        "Retrieval: search the chosen data sources for the message, then answer "
        "from the passages found, citing them."
    )
    first = "search"
    loop = False

    def __init__(self, kit: LoopKit) -> None:
        super().__init__(kit)
        self.phases = {
            "search": self._search,
            "searching": self._searching,
            "answer": self._answer,
        }

    async def _search(self, ctx: AgentContext) -> Decision:
        state = ctx.state
        arguments: dict[str, object] = {"query": state.request.content[:QUERY_CHARS]}
        if state.request.data_sources:
            arguments["sources"] = list(state.request.data_sources)
        call = ToolCall(
            id=f"retrieve_{state.run_id[:12]}",
            name=SEARCH_TOOL,
            arguments=json.dumps(arguments),
        )
        self.kit.tools.take(ctx, Completion(content="", tool_calls=[call]))
        state.phase = "searching"
        return Continue()

    async def _searching(self, ctx: AgentContext) -> Decision:
        return await self.kit.queue_or_observe(ctx, "answer")

    async def _answer(self, ctx: AgentContext) -> Decision:
        kit, state = self.kit, ctx.state
        prompt = kit.prompts.cited_answer_prompt(
            question=state.request.content, found=bool(state.sources)
        )
        reply = await kit.calls.stream(ctx, kit.calls.request(ctx, "chat", prompt))
        text = reply.content.strip()
        return Final(text or None, "finished", "" if text else "The reply was empty.")
