"""Session outbox: replay log, fan-out, slow clients."""

from __future__ import annotations

import json
from typing import Any

from backend.chat.session import Outbox, Session
from backend.chat.subscription import OVERFLOW, Subscription
from backend.errors import InvalidMessage
from backend.notifications import Notifications, stamp
from backend.protocol import ChatResponse, ClientMessage, ResponseComplete
from backend.transcript import Frame


def frame(seq: int) -> Frame:
    payload = ChatResponse(message=f"m{seq}")
    text = stamp(payload, seq=seq, session_id="s", run_id=None, ts=1.0)
    return Frame(seq, None, text)


SIZE = len(frame(1000).text.encode())
"""Bytes of one frame with a four-digit seq."""


class NoMessages:
    """The dispatcher of a session no client message reaches here."""

    async def dispatch(
        self, session: Session, message: ClientMessage
    ) -> dict[str, Any]:
        raise InvalidMessage("no messages in this test")


def test_replay_after_a_seq_then_live_frames() -> None:
    """A subscriber after seq 1 gets frames 2 and 3 replayed, then live frame 4."""
    outbox = Outbox(max_bytes=100 * SIZE)
    for seq in range(1, 4):
        outbox.deliver(frame(seq))
    subscription = outbox.subscribe(after_seq=1)
    outbox.deliver(frame(4))
    replayed = [json.loads(text)["seq"] for text in subscription.take_all()]
    assert replayed == [2, 3, 4]
    assert outbox.oldest_seq == 1


def test_log_is_bounded_by_bytes_and_oldest_seq_says_what_is_left() -> None:
    """The log drops its oldest frames past the byte cap, and `oldest_seq` follows."""
    outbox = Outbox(max_bytes=100 * SIZE)
    for seq in range(1000, 1150):
        outbox.deliver(frame(seq))
    assert outbox.oldest_seq == 1050
    assert outbox.held_bytes == 100 * SIZE
    replayed = [json.loads(t)["seq"] for t in outbox.subscribe(after_seq=0).take_all()]
    assert replayed == list(range(1050, 1150))


def test_one_huge_frame_is_kept_alone_rather_than_not_at_all() -> None:
    """A frame bigger than the log's cap evicts the rest but is itself kept."""
    outbox = Outbox(max_bytes=SIZE)
    outbox.deliver(frame(1000))
    big = stamp(
        ChatResponse(message="x" * 5000), seq=1001, session_id="s", run_id=None, ts=1.0
    )
    outbox.deliver(Frame(1001, None, big))
    assert outbox.oldest_seq == 1001
    assert outbox.held_bytes == len(big)


async def read_all(subscription: Subscription) -> None:
    """Read every queued frame the way the socket writer does."""
    while subscription.pending():
        await subscription.next_frame()


async def test_a_client_that_does_not_read_is_cut_off_not_buffered_forever() -> None:
    """A non-reading subscriber is cut to one overflow marker; a reading one is not."""
    outbox = Outbox(max_bytes=100 * SIZE, client_bytes=50 * SIZE)
    slow = outbox.subscribe(after_seq=None)
    fast = outbox.subscribe(after_seq=None)
    for seq in range(1000, 1051):
        outbox.deliver(frame(seq))
        if seq % 10 == 0:
            await read_all(fast)
    assert slow.overflowed and slow.take_all() == [OVERFLOW]
    assert slow.queued_bytes == 0
    assert not fast.overflowed


def test_session_ready_reports_the_replay_window() -> None:
    """`session_ready` reports the last seq and the oldest seq still replayable."""
    one = len(stamp(ResponseComplete(), seq=100, session_id="s", run_id=None, ts=1.0))
    session = Session(
        "s", owner="local", max_frame_bytes=20 * one, dispatcher=NoMessages()
    )
    session.notify = Notifications("s", session, clock=lambda: 1.0)
    for _ in range(120):
        session.notify.response_complete()
    from backend.protocol import Limits, ServerInfo

    info = ServerInfo(
        limits=Limits(max_steps_cap=5, default_max_steps=2, max_message_bytes=1000),
        model="m",
        models=["m"],
        provider="p",
        tools=[],
        strategies=["react"],
    )
    ready = json.loads(
        session.notify.session_ready(
            resumed=True, info=info, oldest_seq=session.outbox.oldest_seq
        )
    )
    assert (ready["seq"], ready["last_seq"], ready["oldest_seq"]) == (0, 120, 101)
