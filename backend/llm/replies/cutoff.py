"""Replies cut off at the model's length limit (`finish_reason: "length"`).

A server stops a reply when it reaches the request's output limit or the
model's context window, and says so with `finish_reason: "length"`. Cut
in the middle of a tool call or of a control block, such a reply is no
reply the loop can use, and no fault of the model's format either.
`RetryCutOff` wraps an `LLMClient`: a reply its `cut` test calls cut off is
asked for once more, with a shorter request (`shorter`: the conversation
before the latest user message left out, and a note asking for a brief
reply); cut off again, the call fails with `ReplyCutOff`, whose message
says plainly what happened. `cut_call` is the test for tool calls.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from backend.errors import LLMError
from backend.llm.base import (
    Completion,
    LLMClient,
    LLMRequest,
    Message,
    StreamEvent,
    TextDelta,
    Usage,
)
from backend.llm.replies import text_calls

CutTest = Callable[[LLMRequest, Completion], bool]
"""Whether a reply to a request was cut off where it matters."""

BRIEF_NOTE = (
    "Your previous reply was cut off at its length limit before it was complete. "
    "Reply again, briefly: at most two sentences of prose, then what this step "
    "asks for (the JSON block, or the tool call) at once."
)


class ReplyCutOff(LLMError):
    """The model's reply was cut off at its length limit, and so was the retry.
    `usage`: what the two calls cost (they were made, and count)."""

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage = usage or Usage()


def cut_call(reply: Completion) -> bool:
    """A reply cut at its length limit in the middle of a tool call: a native
    call whose arguments are no whole JSON object, or a call begun in text
    (a format's marker, or a reply that opens with `{` / `[`) never found
    whole."""
    if reply.finish_reason != "length":
        return False
    if reply.tool_calls:
        return any(not _whole_object(call.arguments) for call in reply.tool_calls)
    text = reply.content.strip()
    if text[:1] in ("{", "["):
        return True
    return any(
        marker in text
        for form in text_calls.FORMATS
        if form.name != "bare"
        for marker in form.markers
    )


def _whole_object(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False


def shorter(request: LLMRequest) -> LLMRequest:
    """`request` asking for less: the leading system messages, the messages
    from the latest user message on, and `BRIEF_NOTE` last."""
    messages = request.messages
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    start = users[-1] if users and users[-1] > lead else lead
    kept = (*messages[:lead], *messages[start:], Message.system(BRIEF_NOTE))
    return request.model_copy(update={"messages": kept})


def _message(request: LLMRequest) -> str:
    what = "tool call" if request.tools and request.tool_choice != "none" else "reply"
    if request.purpose in ("reason", "observe", "plan"):
        what = "control block"
    return (
        f"The model's reply was cut off at its length limit before its {what} was "
        "complete, and again when asked for a shorter one. The model server's "
        "output limit (or the model's context window) is too small for this step."
    )


class RetryCutOff:
    """An `LLMClient` that asks once more for a reply `cut` calls cut off."""

    def __init__(self, llm: LLMClient, cut: CutTest) -> None:
        self._llm = llm
        self._cut = cut

    @property
    def model(self) -> str:
        return self._llm.model

    @property
    def provider(self) -> str:
        return self._llm.provider

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._llm, name)  # whatever else the client offers

    async def aclose(self) -> None:
        await self._llm.aclose()

    async def complete(self, request: LLMRequest) -> Completion:
        first = await self._llm.complete(request)
        if not self._cut(request, first):
            return first
        second = await self._llm.complete(shorter(request))
        return self._settled(request, first, second)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        """The stream; a cut-off one is followed by the retry's, whose text
        the user has seen already (the same start again) is not sent twice."""
        shown: list[str] = []
        first: Completion | None = None
        async for event in self._llm.stream(request):
            if isinstance(event, TextDelta):
                shown.append(event.text)
                yield event
            else:
                first = event
        if first is None or not self._cut(request, first):
            if first is not None:
                yield first
            return
        seen = "".join(shown)
        second: Completion | None = None
        async for event in self._llm.stream(shorter(request)):
            if isinstance(event, TextDelta):
                text, seen = _past(seen, event.text)
                if text:
                    yield TextDelta(text=text)
            else:
                second = event
        if second is not None:
            yield self._settled(request, first, second)

    def _settled(
        self, request: LLMRequest, first: Completion, second: Completion
    ) -> Completion:
        usage = first.usage + second.usage
        if self._cut(request, second):
            raise ReplyCutOff(_message(request), usage)
        thinking = "\n\n".join(r for r in (first.reasoning, second.reasoning) if r)
        return second.model_copy(update={"usage": usage, "reasoning": thinking})


def _past(seen: str, text: str) -> tuple[str, str]:
    """`text` without what of it repeats `seen` (text already shown), and
    what of `seen` is left to match; once they differ, everything shows."""
    if not seen:
        return text, ""
    if seen.startswith(text):
        return "", seen[len(text) :]
    if text.startswith(seen):
        return text[len(seen) :], ""
    return text, ""
