"""`Mirror`: another instance's frames, each once and in order.

The owner's replay window comes with the attach reply; published frames
after it name the frame before them. What the mirror's clients get must be
exactly the owner's sequence: nothing twice, nothing missed without the
mirror noticing (then it attaches again from its last seq).
"""

from __future__ import annotations

import json

from backend.bus.base import Reply
from backend.bus.messages import Attached, CommandBody
from backend.chat.mirror import Mirror
from backend.chat.subscription import Subscription
from backend.notifications import head_of, stamp
from backend.protocol import AgentStart, ResponseComplete, ToolComplete


def text(seq: int, run_id: str | None = "r1", *, end: bool = False) -> str:
    payload = ResponseComplete() if end else AgentStart(max_steps=3, strategy="react")
    return stamp(payload, seq=seq, session_id="s" * 32, run_id=run_id, ts=1.0)


class Unlinked:
    """A mirror's link to an owner these tests never reach."""

    async def forward(self, mirror: Mirror, body: CommandBody) -> Reply:
        raise AssertionError("nothing is forwarded in these tests")

    def forward_soon(self, mirror: Mirror, body: CommandBody) -> None:
        raise AssertionError("nothing is forwarded in these tests")


def drained(subscription: Subscription) -> list[int]:
    """The seqs of the frames queued for `subscription`, taken."""
    return [json.loads(text)["seq"] for text in subscription.take_all()]


def attached(frames: range, last_seq: int, run_id: str | None = "r1") -> Mirror:
    mirror = Mirror("s" * 32, owner="alice", max_frame_bytes=1 << 20, link=Unlinked())
    body = Attached(
        frames=[(s, text(s)) for s in frames], last_seq=last_seq, run_id=run_id
    )
    mirror.sync("instance-a", body)
    return mirror


def test_frames_after_the_window_come_once_each_in_order() -> None:
    """Frames after the attach window reach clients once each and in order."""
    mirror = attached(range(1, 4), 3)
    client = mirror.outbox.subscribe(0)
    assert mirror.receive(3, 4, text(4))
    assert mirror.receive(3, 4, text(4))  # published twice: taken once
    assert mirror.receive(2, 3, text(3))  # held already
    assert mirror.receive(4, 5, text(5))
    assert drained(client) == [1, 2, 3, 4, 5]
    assert (mirror.last_seq, mirror.holder) == (5, "instance-a")


def test_a_missed_frame_is_noticed_not_skipped() -> None:
    """A frame whose predecessor never came is refused until a re-attach fills in."""
    mirror = attached(range(1, 3), 2)
    client = mirror.outbox.subscribe(2)
    assert mirror.receive(3, 4, text(4)) is False  # 3 never came
    assert drained(client) == [] and mirror.last_seq == 2
    mirror.sync("instance-a", Attached(frames=[(3, text(3)), (4, text(4))], last_seq=4))
    assert drained(client) == [3, 4]


def test_a_new_owner_after_a_crash_goes_on_past_the_gap_it_leaves() -> None:
    """A new owner's frame that jumps far ahead after a crash is still delivered."""
    mirror = attached(range(1, 11), 10)
    client = mirror.outbox.subscribe(10)
    # the new owner stored frames up to 8 only, and skips a million seqs
    assert mirror.receive(8, 1_000_009, text(1_000_009))
    assert drained(client) == [1_000_009]


def test_frames_published_before_the_attach_reply_wait_for_it() -> None:
    """Frames published before the attach reply are held until its window arrives."""
    mirror = Mirror("s" * 32, owner="alice", max_frame_bytes=1 << 20, link=Unlinked())
    assert mirror.receive(3, 4, text(4))  # before the reply: held back
    assert mirror.receive(4, 5, text(5))
    client = mirror.outbox.subscribe(0)
    mirror.sync("b", Attached(frames=[(s, text(s)) for s in (1, 2, 3, 4)], last_seq=4))
    assert drained(client) == [1, 2, 3, 4, 5]


def test_the_run_in_progress_follows_the_frames() -> None:
    """The mirror's `run_id` is set by a run's frames and cleared at the run's end."""
    mirror = attached(range(1, 2), 1, run_id=None)
    assert mirror.run_id is None
    mirror.receive(1, 2, text(2, "r7"))
    assert mirror.run_id == "r7"
    mirror.receive(2, 3, text(3, "r7", end=True))
    assert mirror.run_id is None


def test_a_notice_reaches_the_clients_but_is_not_replayed() -> None:
    """A notice reaches connected clients with seq 0 but is not replayed later."""
    mirror = attached(range(1, 3), 2)
    client = mirror.outbox.subscribe(2)
    mirror.notice("cannot reach the owner", "unavailable")
    [notice] = [json.loads(text) for text in client.take_all()]
    assert (notice["seq"], notice["error_type"]) == (0, "unavailable")
    later = mirror.outbox.subscribe(0)
    assert drained(later) == [1, 2]


def test_a_frame_head_is_read_through_the_protocol() -> None:
    """`head_of` reads the head of what `stamp` wrote, however its strings
    look and however long its payload."""
    tricky = 'a,"type":"x"'
    frame = stamp(
        ToolComplete(
            tool_call_id="c1",
            tool_name="search",
            result={"text": ',"type":"' * 2000},
            duration_ms=3,
            step=1,
        ),
        seq=7,
        session_id=tricky,
        run_id="r2",
        ts=1.5,
    )
    assert head_of(frame) == {"seq": 7, "run_id": "r2", "type": "tool_complete"}
    assert head_of(text(3, None)) == {"seq": 3, "run_id": None, "type": "agent_update"}
    assert head_of("not a frame") is None
