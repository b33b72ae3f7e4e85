"""A streamed chat completion: its server-sent events read as chunks, and
the chunks assembled into text as it comes and one final `Completion`.

`chunks` parses the events up to `[DONE]` and turns a failed read, or an
error event from the server, into the SDK's exceptions. A `StreamAssembler`
folds the chunks: text deltas, thinking deltas (`reasoning_content` or
`reasoning`), tool-call argument fragments matched to their
call by index (servers that omit or reuse the index are handled too), and the
usage the server sends in its last chunk. A stream that ends without a finish
reason was cut off (`CutShort`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai

from backend.llm.base import Completion, ToolCall, Usage
from backend.llm.openai_compat import wire
from backend.llm.openai_compat.faults import CutShort
from backend.llm.replies.normaliser import arguments_text
from backend.llm.sse import EventTooLarge, SSEReader
from backend.llm.tokens import UNREPORTED

__all__ = ["StreamAssembler", "chunks"]

_SSE = SSEReader()


async def chunks(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """The stream's chunks, parsed, up to `[DONE]`; read failures become the
    SDK's exceptions, an error event the server sends an `APIError`."""
    try:
        async for data in _SSE.events(response.aiter_bytes()):
            if data == b"[DONE]":
                return
            chunk = wire.json_object(data)
            error = chunk.get("error")
            if error is not None:
                message = error.get("message") if isinstance(error, dict) else error
                raise openai.APIError(
                    str(message or "the stream reported an error"),
                    response.request,
                    body=error,
                )
            yield chunk
    except httpx2.TimeoutException as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except (httpx2.TransportError, EventTooLarge) as exc:
        raise openai.APIConnectionError(request=response.request) from exc


@dataclass
class _PartialCall:
    """A streamed tool call being assembled from its fragments."""

    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamAssembler:
    """Folds chat completion chunks into the final `Completion`.

    Tool-call fragments are matched to their call by `index`; servers that omit
    it are handled by id, else a fragment carrying a name starts a new call and
    one without continues the latest. A fragment whose index is taken by a call
    with a different id (servers that send index 0 for every parallel call)
    starts a new call.
    """

    new_call_id: Callable[[], str]
    text: list[str] = field(default_factory=list)
    calls: list[_PartialCall] = field(default_factory=list)
    by_index: dict[int, _PartialCall] = field(default_factory=dict)
    reasoning: list[str] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None

    def feed(self, chunk: dict[str, Any]) -> str:
        """Absorb one chunk; return its new text ("" when none)."""
        chunk_usage = chunk.get("usage")
        if chunk_usage is not None:
            self.usage = wire.usage(chunk_usage)
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list):
            return ""
        new_text = ""
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # only the first choice is used (n is never > 1)
            finish = choice.get("finish_reason")
            if finish:
                self.finish_reason = str(finish)
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            fragments = delta.get("tool_calls")
            if fragments and isinstance(fragments, list):
                for fragment in fragments:
                    if isinstance(fragment, dict):
                        self._feed_tool_call(fragment)
            thought = wire.reasoning(delta)
            if thought:
                self.reasoning.append(thought)
            content = delta.get("content")
            if content and isinstance(content, str):
                self.text.append(content)
                new_text += content
        return new_text

    def completion(self) -> Completion:
        """The whole reply; `CutShort` if the stream ended before its finish
        reason (the connection closed before the reply was complete)."""
        if self.finish_reason is None:
            raise CutShort("the stream ended without a finish reason")
        return Completion(
            content="".join(self.text),
            reasoning="".join(self.reasoning).strip(),
            tool_calls=tuple(self._finished_calls()),
            usage=self.usage or UNREPORTED,
            finish_reason=self.finish_reason,
        )

    def _feed_tool_call(self, fragment: dict[str, Any]) -> None:
        function = fragment.get("function")
        if not isinstance(function, dict):
            function = {}
        name = wire.text(function.get("name"))
        index = fragment.get("index")
        call = self._call_for(
            index=index if isinstance(index, int) else None,
            call_id=wire.text(fragment.get("id")) or None,
            name=name,
        )
        if name and not call.name:
            call.name = name
        arguments = arguments_text(function.get("arguments"))
        if arguments:
            call.arguments.append(arguments)

    def _call_for(
        self, *, index: int | None, call_id: str | None, name: str
    ) -> _PartialCall:
        known = self.by_index.get(index) if index is not None else None
        if known is not None and (call_id is None or known.id in (None, call_id)):
            return known
        # a new index is a new call, even with an id seen before (servers
        # that give every call of a reply the same id)
        if call_id is not None and (index is None or known is not None):
            for call in self.calls:
                if call.id == call_id:
                    return call
        if index is not None:
            call = self._start_call(call_id)
            self.by_index[index] = call
            return call
        latest = self.calls[-1] if self.calls else None
        if latest is None or call_id is not None or (name and latest.name):
            return self._start_call(call_id)
        return latest

    def _start_call(self, call_id: str | None) -> _PartialCall:
        call = _PartialCall(id=call_id)
        self.calls.append(call)
        return call

    def _finished_calls(self) -> Iterable[ToolCall]:
        for call in self.calls:
            if not call.name:
                continue  # nothing callable was streamed
            yield ToolCall(
                id=call.id or self.new_call_id(),
                name=call.name,
                arguments="".join(call.arguments) or "{}",
            )
