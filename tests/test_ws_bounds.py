"""Every WebSocket input has a bound: hostile frames get an error, never a crash.

Against a live server: malformed resume parameters are refused with a
reason; deep, huge-number and oversized JSON, binary frames and unknown
types are `invalid_message` errors that quote at most a short preview, and
the connection stays usable; a flood is throttled, then closed (1008); an
unexpected failure closes with 1011, never silently. A frame past the
transport's limit is closed with 1009, and the client, still sending it,
reads that close.
"""

from __future__ import annotations

import asyncio
import json
import re
import struct

import pytest
from websockets.exceptions import ConnectionClosed

from backend import server
from tests.conftest import Harness, StartServer
from tests.fakes import ScriptedLLM, test_registry
from tests.ws_client import Client, Frame, label

STOP = json.dumps({"type": "agent_control", "action": "stop"})


async def closed(client: Client) -> tuple[list[Frame], int | None, str]:
    frames: list[Frame] = []
    try:
        while True:
            frames.append(await client.recv())
    except ConnectionClosed as exc:
        return (
            frames,
            exc.rcvd.code if exc.rcvd else None,
            (exc.rcvd.reason if exc.rcvd else ""),
        )


async def served(
    start_server: StartServer, *replies: str, **settings: object
) -> Harness:
    """A server whose model answers `replies`, in turn."""
    return await start_server(ScriptedLLM(*replies), test_registry(), **settings)


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("session_id=does-not-exist", "session_id must be the 32 hex digits"),
        ("session_id=" + "a" * 5000, "session_id must be the 32 hex digits"),
        (f"session_id={'0' * 32}&last_seq={'9' * 5000}", "last_seq must be"),
        (f"session_id={'0' * 32}&last_seq=%C2%B2", "last_seq must be"),
        (f"session_id={'0' * 32}&last_seq=-1", "last_seq must be"),
    ],
)
async def test_malformed_resume_parameters_are_refused_with_a_reason(
    start_server: StartServer, query: str, problem: str
) -> None:
    """A malformed `session_id` or `last_seq` gets an error, then a 1008 close."""
    harness = await served(start_server)
    frames, code, _ = await closed(await harness.connect(query))
    assert [label(f) for f in frames] == ["error:invalid_message"]
    assert frames[0]["message"].startswith(problem)
    assert code == 1008


@pytest.mark.parametrize(
    ("frame", "problem"),
    [
        ("[" * 30_000 + "]" * 30_000, "JSON nested deeper than 32 levels"),
        ('{"a":' * 1_000 + "1" + "}" * 1_000, "JSON nested deeper than 32 levels"),
        (
            '{"type": "chat", "content": "hi", "agent_max_steps": ' + "9" * 5_000 + "}",
            "a number has more than 30 digits",
        ),
        ('{"type": "chat", "content": "hi", "temperature": NaN}', "NaN is not valid"),
        ('{"type": "' + "x" * 60_000 + '"}', "unknown message type 'xxxxxxxx"),
        (
            '{"type": "agent_user_input", "content": "a", "question_id": "a b"}',
            "invalid agent_user_input message: question_id: String should match",
        ),
        (
            '{"type": "tool_approval_response", "tool_call_id": "'
            + "c" * 300
            + '", "approved": true}',
            "invalid tool_approval_response message",
        ),
        (
            '{"type": "chat", "content": "hi", "agent_max_steps": 10001}',
            "invalid chat message: agent_max_steps: Input should be less than",
        ),
    ],
)
async def test_hostile_json_is_an_invalid_message_and_the_socket_stays_usable(
    start_server: StartServer, frame: str, problem: str
) -> None:
    """Deep, huge-number, NaN or oversized JSON gets a short error; the socket lives."""
    harness = await served(start_server, "Hello there.")
    client, _ = await harness.ready_client()
    await client.send_raw(frame)
    error = await client.recv()
    assert label(error) == "error:invalid_message"
    assert error["message"].startswith(problem)
    assert len(error["message"]) < 400  # a preview, never the client's input
    reply = await client.chat("still there?")
    assert "chat_response" in [f["type"] for f in reply]


async def test_a_binary_frame_is_refused_with_a_reason(
    start_server: StartServer,
) -> None:
    """A binary frame gets an `invalid_message` error asking for JSON text frames."""
    harness = await served(start_server)
    client, _ = await harness.ready_client()
    await client.send_raw(b"\x00\xff" * 100)
    error = await client.recv()
    assert (label(error), error["message"]) == (
        "error:invalid_message",
        "binary frames are not supported; send JSON text frames",
    )


async def test_a_flood_is_throttled_then_closed(start_server: StartServer) -> None:
    """A flood gets its burst served, one `rate_limited` error, then a 1008 close."""
    harness = await served(start_server, ws_messages_per_s=0.001, ws_message_burst=5)
    client, _ = await harness.ready_client()
    for _ in range(50):
        await client.send_raw(STOP)
    frames, code, reason = await closed(client)
    assert [label(f) for f in frames] == [
        *["error:no_active_run"] * 5,  # the burst is served
        "error:rate_limited",  # then one error says why the rest are dropped
    ]
    assert (code, reason) == (1008, "too many messages; slow down and reconnect")


async def test_a_neighbour_is_served_while_one_socket_floods(
    start_server: StartServer,
) -> None:
    """One socket flooding does not keep another client's chat from being answered."""
    harness = await served(start_server, ws_message_burst=20)
    flooder, _ = await harness.ready_client()
    neighbour, _ = await harness.ready_client()
    for _ in range(200):
        await flooder.send_raw(STOP)
    reply = await neighbour.chat("hello?")
    assert reply[-1]["type"] == "response_complete"
    _, code, _ = await closed(flooder)
    assert code == 1008


async def test_an_unexpected_failure_closes_with_1011(
    start_server: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug while handling a frame closes the socket with 1011 and an incident id."""
    harness = await served(start_server)
    client, _ = await harness.ready_client()

    def broken(*_args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(harness.service, "handle", broken)
    await client.send_raw(STOP)
    frames, code, reason = await closed(client)
    assert (frames, code) == ([], 1011)
    assert re.fullmatch(r"internal error \(incident [0-9a-f]{12}\)", reason)


HANDSHAKE = (
    b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: bG9vcHdpcmUtdGVzdHMtaw==\r\n"
    b"Sec-WebSocket-Version: 13\r\n\r\n"
)


async def server_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One unmasked frame from the server: (opcode, payload)."""
    head = await reader.readexactly(2)
    size = head[1] & 0x7F
    if size == 126:
        (size,) = struct.unpack("!H", await reader.readexactly(2))
    elif size == 127:
        (size,) = struct.unpack("!Q", await reader.readexactly(8))
    return head[0] & 0x0F, await reader.readexactly(size)


async def test_a_frame_past_the_transport_limit_is_closed_with_1009_and_drained(
    start_server: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A raw client declares a 2 MiB frame (the transport's limit is 1 MiB
    here) and sends it. The server answers with a 1009 close, then keeps
    reading what the client still sends (dropping it) until the grace
    period ends, and closes cleanly (EOF): closing a socket with unread
    data would reset it, and a client still writing would lose the close."""
    monkeypatch.setattr(server, "LINGER_IDLE_S", 1.0)
    harness = await served(start_server, max_message_bytes=1024)
    assert harness.server.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", harness.server.port)
    writer.write(HANDSHAKE)
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
    opcode, ready = await server_frame(reader)
    assert (opcode, json.loads(ready)["type"]) == (1, "session_ready")

    size = 2 << 20
    writer.write(struct.pack("!BBQ", 0x81, 0x80 | 127, size) + b"mask")
    writer.write(bytes(size // 2))
    await writer.drain()
    opcode, payload = await server_frame(reader)
    assert (opcode, struct.unpack("!H", payload[:2])[0], payload[2:]) == (
        8,
        1009,
        b"frame with 2097152 bytes exceeds limit of 1048576 bytes",
    )
    writer.write(bytes(size // 2))  # the rest of the frame, after the close
    await writer.drain()
    assert await reader.read() == b""  # a clean close, not a reset
    writer.close()

    client, _ = await harness.ready_client()  # the server serves on
    assert (await client.chat("still here"))[-1]["type"] == "response_complete"
