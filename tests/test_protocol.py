"""The wire contract: the exported schema is current and frames round-trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from backend.__main__ import main
from backend.protocol import (
    CLIENT_MESSAGE_TYPES,
    FRAME_MODELS,
    AgentControlMessage,
    ChatMessage,
    Envelope,
    RunEvent,
    client_message_adapter,
    json_schema,
    server_message_adapter,
)

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "docs" / "protocol.schema.json"


def test_exported_schema_is_current() -> None:
    """The committed `docs/protocol.schema.json` matches the schema the code exports."""
    expected = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    assert SCHEMA_FILE.read_text(encoding="utf-8") == expected, (
        "docs/protocol.schema.json is stale: run `make schema`"
    )


def test_schema_command_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """The `schema` command prints the protocol schema as JSON and exits 0."""
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["title"] == "loopwire protocol v1"
    assert set(printed["properties"]) == {"client_message", "server_message"}


def test_schema_names_every_server_frame_and_update() -> None:
    """The schema names every server frame type and agent update type."""
    text = json.dumps(json_schema())
    for name in (
        "session_ready",
        "agent_update",
        "tool_start",
        "tool_complete",
        "tool_error",
        "tool_approval_request",
        "token_stream",
        "chat_response",
        "response_complete",
        "session_reset",
        "runs_removed",
        "error",
        "agent_start",
        "agent_turn_start",
        "agent_reason",
        "agent_request_input",
        "agent_request_input_timeout",
        "agent_observe",
        "agent_duplicate_call",
        "agent_max_steps_reached",
        "agent_stopped",
        "agent_completion",
        "agent_error",
    ):
        assert f'"{name}"' in text, name


def test_chat_defaults() -> None:
    """A bare chat message parses with agent mode off and no step or tool choice."""
    message = client_message_adapter.validate_json('{"type": "chat", "content": "hi"}')
    assert message == ChatMessage(type="chat", content="hi")
    assert isinstance(message, ChatMessage)
    assert (message.agent_mode, message.agent_max_steps, message.selected_tools) == (
        False,
        None,
        None,
    )


def test_grant_steps_round_trip() -> None:
    """A `grant_steps` control message parses into an `AgentControlMessage` and
    dumps back to the same JSON."""
    raw = '{"type": "agent_control", "action": "grant_steps", "steps": 3}'
    message = client_message_adapter.validate_json(raw)
    assert message == AgentControlMessage(
        type="agent_control", action="grant_steps", steps=3
    )
    dumped = json.loads(client_message_adapter.dump_json(message))
    assert dumped == {**json.loads(raw), "budget": None}


def test_server_frames_parse_by_type_and_update_type() -> None:
    """A server frame parses to its model by `type` and `update_type` and dumps back."""
    frame = server_message_adapter.validate_python(
        {
            "type": "agent_update",
            "update_type": "agent_stopped",
            "step": 2,
            "mode": "immediate",
            "seq": 7,
            "session_id": "s",
            "run_id": "r",
            "ts": 1.5,
        }
    )
    assert type(frame).__name__ == "AgentStoppedFrame"
    assert json.loads(frame.model_dump_json())["update_type"] == "agent_stopped"


def test_client_message_types_come_from_the_union() -> None:
    """`CLIENT_MESSAGE_TYPES` lists the client message types in union order."""
    assert CLIENT_MESSAGE_TYPES == (
        "chat",
        "agent_control",
        "agent_user_input",
        "tool_approval_response",
        "tool_result",
        "cancel_input",
        "reset_session",
        "switch_branch",
    )


def test_every_payload_has_one_flat_frame_model() -> None:
    """A frame model adds the envelope to its payload and nothing else."""
    envelope = set(Envelope.model_fields)
    for payload, frame in FRAME_MODELS.items():
        assert set(frame.model_fields) == envelope | set(payload.model_fields)
        assert frame.__name__ == f"{payload.__name__}Frame"
    run_events = {p.__name__ for p in get_args(RunEvent)}
    assert run_events <= {p.__name__ for p in FRAME_MODELS}
