"""Session outbox: replay log, fan-out, slow clients."""

from __future__ import annotations

import json

from backend.chat.session import OVERFLOW, Outbox, Session
from backend.notifications import Frame, stamp
from backend.protocol import ChatResponse


def frame(seq: int) -> Frame:
    payload = ChatResponse(message=f"m{seq}")
    text = stamp(payload, seq=seq, session_id="s", run_id=None, ts=1.0)
    return Frame(seq, None, text)


def drain(queue_owner: object) -> list[str]:
    queue = queue_owner.queue  # type: ignore[attr-defined]
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


def test_replay_after_a_seq_then_live_frames() -> None:
    outbox = Outbox(max_frames=100)
    for seq in range(1, 4):
        outbox.deliver(frame(seq))
    subscription = outbox.subscribe(after_seq=1)
    outbox.deliver(frame(4))
    replayed = [json.loads(text)["seq"] for text in drain(subscription)]
    assert replayed == [2, 3, 4]
    assert outbox.oldest_seq == 1


def test_log_is_bounded_and_oldest_seq_says_what_is_left() -> None:
    outbox = Outbox(max_frames=100)
    for seq in range(1, 151):
        outbox.deliver(frame(seq))
    assert outbox.oldest_seq == 51
    replayed = [json.loads(t)["seq"] for t in drain(outbox.subscribe(after_seq=0))]
    assert replayed == list(range(51, 151))


def test_a_client_that_does_not_read_is_cut_off_not_buffered_forever() -> None:
    outbox = Outbox(max_frames=100)
    slow = outbox.subscribe(after_seq=None)
    fast = outbox.subscribe(after_seq=None)
    for seq in range(1, 1002):
        outbox.deliver(frame(seq))
        if seq % 10 == 0:
            drain(fast)
    assert slow.overflowed and drain(slow) == [OVERFLOW]
    assert not fast.overflowed


def test_session_ready_reports_the_replay_window() -> None:
    session = Session("s", max_frames=100)
    for _ in range(120):
        session.notify.response_complete()
    from backend.protocol import Limits, ServerInfo

    info = ServerInfo(
        limits=Limits(max_steps_cap=5, default_max_steps=2, max_message_bytes=1000),
        model="m",
        provider="p",
        tools=[],
        strategies=["react"],
    )
    ready = json.loads(
        session.notify.session_ready(
            resumed=True, info=info, oldest_seq=session.outbox.oldest_seq
        )
    )
    assert (ready["seq"], ready["last_seq"], ready["oldest_seq"]) == (0, 120, 21)
