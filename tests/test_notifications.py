"""Notifications: the one place payloads become frames (envelope + payload)."""

from __future__ import annotations

import json

from backend.notifications import Notifications, outside_session, stamp
from backend.protocol import (
    AgentReason,
    AgentTurnStart,
    Error,
    ReasonControl,
    ToolStart,
    server_message_adapter,
)
from backend.transcript import Frame


class Collected:
    def __init__(self) -> None:
        self.frames: list[Frame] = []

    def deliver(self, frame: Frame) -> None:
        self.frames.append(frame)

    def parsed(self) -> list[dict[str, object]]:
        return [json.loads(f.text) for f in self.frames]


def notifications() -> tuple[Notifications, Collected]:
    out = Collected()
    clock = iter(float(t) for t in range(100, 200))
    return Notifications("s1", out, clock=lambda: next(clock)), out


def test_a_frame_is_the_envelope_then_the_payload_and_parses_as_its_model() -> None:
    """An emitted update is stamped with seq, session, run and time, and parses back."""
    notify, out = notifications()
    notify.begin_run("r1", agent=True)
    control = ReasonControl(plan="Add.", tools_to_consider=["add"])
    notify.emit(AgentReason(step=1, content="I add.", control=control))

    (frame,) = out.frames
    assert (frame.seq, frame.run_id) == (1, "r1")
    assert json.loads(frame.text) == {
        "seq": 1,
        "session_id": "s1",
        "run_id": "r1",
        "ts": 100.0,
        "type": "agent_update",
        "update_type": "agent_reason",
        "step": 1,
        "content": "I add.",
        "control": {
            "plan": "Add.",
            "tools_to_consider": ["add"],
            "finish": False,
            "final_answer": "",
            "ask_user": "",
        },
    }
    parsed = server_message_adapter.validate_json(frame.text)
    assert type(parsed).__name__ == "AgentReasonFrame" and parsed.seq == 1


def test_seq_counts_every_frame_and_errors_outside_the_run_have_no_run_id() -> None:
    """Each frame takes the next seq; errors outside the run and resets lack run ids."""
    notify, out = notifications()
    notify.begin_run("r1", agent=True)
    notify.emit(AgentTurnStart(step=1, max_steps=3))
    notify.error("no question is waiting", "no_pending_input")
    notify.error("the model failed", "llm_error", in_run=True)
    notify.response_complete()
    notify.end_run()
    notify.session_reset()

    frames = out.parsed()
    assert [f["seq"] for f in frames] == [1, 2, 3, 4, 5]
    assert [f["run_id"] for f in frames] == ["r1", None, "r1", "r1", None]
    assert notify.last_seq == 5


def test_a_plain_run_shows_no_agent_updates() -> None:
    """A non-agent run drops agent updates, keeps tool and chat frames, seq unbroken."""
    notify, out = notifications()
    notify.begin_run("r1", agent=False)
    notify.emit(AgentTurnStart(step=1, max_steps=4))
    notify.emit(
        ToolStart(tool_call_id="c1", tool_name="add", arguments={"x": 1}, step=1)
    )
    notify.chat_response("done")
    notify.end_run()
    notify.begin_run("r2", agent=True)
    notify.emit(AgentTurnStart(step=1, max_steps=4))

    assert [(f["seq"], f["type"]) for f in out.parsed()] == [
        (1, "tool_start"),
        (2, "chat_response"),
        (3, "agent_update"),
    ]


def test_text_is_escaped_properly_in_both_halves() -> None:
    """Quotes, newlines and U+2028 in payload and envelope survive as valid JSON."""
    text = stamp(
        Error(message='say "hi"\n\u2028', error_type="invalid_message"),
        seq=3,
        session_id='odd"id',
        run_id=None,
        ts=1.5,
    )
    assert json.loads(text)["message"] == 'say "hi"\n\u2028'
    assert json.loads(text)["session_id"] == 'odd"id'
    server_message_adapter.validate_json(text)


def test_a_refusal_before_any_session_has_seq_zero() -> None:
    """An error sent before any session has seq 0, no session id and no run id."""
    frame = json.loads(
        outside_session(
            Error(message="bad token", error_type="unauthorized"), clock=lambda: 7.0
        )
    )
    assert (frame["seq"], frame["session_id"], frame["run_id"], frame["ts"]) == (
        0,
        "",
        None,
        7.0,
    )
