"""Every WebSocket input has a bound: hostile frames get an error, never a crash.

Against a live server: malformed resume parameters are refused with a
reason; deep, huge-number and oversized JSON, binary frames and unknown
types are `invalid_message` errors that quote at most a short preview, and
the connection stays usable; a flood is throttled, then closed (1008); an
unexpected failure closes with 1011, never silently.
"""

from __future__ import annotations

import json
import re

import pytest
from websockets.exceptions import ConnectionClosed

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


async def served(start_server: StartServer, **settings: object) -> Harness:
    return await start_server(ScriptedLLM("Hello there."), test_registry(), **settings)


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
    harness = await served(start_server)
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
    harness = await served(start_server)
    client, _ = await harness.ready_client()
    await client.send_raw(b"\x00\xff" * 100)
    error = await client.recv()
    assert (label(error), error["message"]) == (
        "error:invalid_message",
        "binary frames are not supported; send JSON text frames",
    )


async def test_a_flood_is_throttled_then_closed(start_server: StartServer) -> None:
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
    harness = await served(start_server)
    client, _ = await harness.ready_client()

    def broken(*_args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(harness.service, "handle", broken)
    await client.send_raw(STOP)
    frames, code, reason = await closed(client)
    assert (frames, code) == ([], 1011)
    assert re.fullmatch(r"internal error \(incident [0-9a-f]{12}\)", reason)
