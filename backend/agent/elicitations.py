"""Questions a tool asks the user in the middle of its call.

An MCP server may ask for a few values (form mode) or that the person open
a link (URL mode) while one of its tools runs (`tools/elicitation.py`).
Each becomes the run's pending question — the same durable pause as one the
model asks, with `asked_by` naming the asker: `asker` gives a call's
`ToolContext.ask`, which stores the question with a checkpoint, shows it,
and waits with the run's clocks stopped (`ctx.ask_in_phase`). The person
answers (`accept`, the form checked against its schema as any answer is),
declines, or dismisses it; no answer in time and a graceful stop dismiss it
(`cancel`). Stop now cancels the call itself.

Across a restart: the question was stored while the call ran, so the run
continues from a checkpoint whose call is in flight. The driver waits for
the answer first, as for any pending question; then `resumed` keeps the
reply aside and the call is made again under the in-doubt rules
(`tool_calls.py`). The server, asked again, asks the same question: it gets
the kept reply at once, and the person is not asked twice.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from backend.agent.loop import AgentContext
from backend.agent.state import (
    Answered,
    AskedInCall,
    PendingQuestion,
    WaitOutcome,
)
from backend.answer_forms import answer_value
from backend.errors import InvalidAnswer
from backend.llm.base import ToolCall
from backend.tools.elicitation import Asker, Elicitation, ElicitationReply


def asker(
    ctx: AgentContext,
    call: ToolCall,
    timeout_s: float,
    clock: Callable[[], float] = time.time,
) -> Asker | None:
    """`call`'s way to ask the person behind its run (None if nobody can)."""
    ask_in_phase = ctx.ask_in_phase
    if ask_in_phase is None:
        return None

    async def ask(elicitation: Elicitation) -> ElicitationReply:
        state = ctx.state
        kept, state.asked_in_call = state.asked_in_call, None
        if kept is not None and _same(kept.question, call, elicitation):
            if kept.reply is not None:
                return reply_of(kept.reply, kept.question)
            outcome = await ask_in_phase(kept.question, False)  # still shown
            return reply_of(outcome, kept.question)
        question = PendingQuestion(
            question_id=uuid.uuid4().hex,
            question=elicitation.message,
            step=state.step,
            timeout_s=timeout_s,
            deadline=clock() + timeout_s,
            tool_call_id=call.id,
            answer_schema=elicitation.schema,
            asked_by=elicitation.asked_by,
            url=elicitation.url,
        )
        return reply_of(await ask_in_phase(question, True), question)

    return ask


def resumed(ctx: AgentContext) -> None:
    """A run continued from a checkpoint taken while a call of it asked
    mid-call: keep the question and its reply (the driver waited for it)
    for the call made again."""
    state = ctx.state
    question = state.pending_question
    if question is None or question.asked_by is None:
        return
    state.asked_in_call = AskedInCall(question=question, reply=state.resolution)
    state.pending_question = state.resolution = None


def reply_of(outcome: WaitOutcome, question: PendingQuestion) -> ElicitationReply:
    """How a wait ended, as the asker hears it."""
    if not isinstance(outcome, Answered) or outcome.action == "cancel":
        return ElicitationReply("cancel")  # no answer in time, or a stop
    if outcome.action == "decline":
        return ElicitationReply("decline")
    if question.answer_schema is None:
        return ElicitationReply("accept")  # URL mode: done on the page
    return ElicitationReply("accept", _values(question.answer_schema, outcome))


def _values(schema: dict[str, Any], answer: Answered) -> dict[str, Any] | None:
    try:
        value = answer_value(schema, answer.content)
    except InvalidAnswer:  # checked when it came: only a changed schema
        return None
    return value if isinstance(value, dict) else None


def _same(question: PendingQuestion, call: ToolCall, asked: Elicitation) -> bool:
    """The question kept for `call` is the one it asks again."""
    kept = Elicitation(
        message=question.question,
        asked_by=question.asked_by or "",
        schema=question.answer_schema,
        url=question.url,
    )
    return question.tool_call_id == call.id and kept.same_as(asked)
