"""`SSEReader` and the chat completions stream read through it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import httpx2
import openai
import pytest

from backend.llm.openai_compat.stream import chunks
from backend.llm.sse import EventTooLarge, SSEReader


async def pieces(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def read(chunks: Sequence[bytes], limit: int = 1024) -> list[bytes]:
    return [data async for data in SSEReader(limit).events(pieces(*chunks))]


async def test_events_split_anywhere_are_put_back_together() -> None:
    """Events split at any byte across chunks are reassembled, and comments skipped."""
    stream = b'data: {"a":1}\n\ndata: {"b":2}\n\n: keep-alive\n\ndata: [DONE]\n\n'
    whole = await read([stream])
    assert whole == [b'{"a":1}', b'{"b":2}', b"[DONE]"]
    for cut in range(1, len(stream)):
        assert await read([stream[:cut], stream[cut:]]) == whole
    assert await read([bytes([b]) for b in stream]) == whole


async def test_crlf_multiline_data_other_fields_and_an_unended_last_event() -> None:
    """CRLF, multi-line data and an unended last event parse, other fields ignored."""
    stream = b"event: x\r\nid: 7\r\ndata:one\r\ndata: two\r\n\r\nretry: 5\n\ndata: last"
    assert await read([stream]) == [b"one\ntwo", b"last"]


async def test_an_event_or_a_line_past_the_limit_is_refused() -> None:
    """An event or a single line over the size limit raises `EventTooLarge`."""
    with pytest.raises(EventTooLarge, match="an event of over 64 bytes"):
        await read([b"data: " + b"x" * 40 + b"\n", b"data: " + b"y" * 40 + b"\n\n"], 64)
    with pytest.raises(EventTooLarge, match="a line of over 64 bytes"):
        await read([b"data: " + b"z" * 100], 64)


def response(body: bytes) -> httpx2.Response:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    return httpx2.Response(200, content=body, request=request)


async def test_chunks_stop_at_done_and_parse_json() -> None:
    """The completion stream yields parsed JSON chunks and stops at `[DONE]`."""
    body = b'data: {"choices":[]}\n\ndata: [DONE]\n\ndata: {"late":1}\n\n'
    assert [c async for c in chunks(response(body))] == [{"choices": []}]


async def test_an_error_event_is_the_servers_error() -> None:
    """An `error` event raises `openai.APIError` carrying the server's message."""
    body = b'data: {"error": {"message": "model overloaded", "code": 503}}\n\n'
    with pytest.raises(openai.APIError) as caught:
        [c async for c in chunks(response(body))]
    assert caught.value.message == "model overloaded"
    assert caught.value.body == {"message": "model overloaded", "code": 503}
