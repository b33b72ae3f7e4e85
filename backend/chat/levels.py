"""What `/metrics` reads of the service at each scrape (`Levels`)."""

from __future__ import annotations

from backend.bus.base import Bus
from backend.chat.session import Session
from backend.telemetry.metrics import Levels


def levels_of(sessions: dict[str, Session], bus: Bus) -> Levels:
    """Sessions by state (a client attached, in memory, a run waiting for
    a person), the bus's queue and the conversations owned here (one
    instance alone owns every conversation it holds)."""
    held = sessions.values()
    connected = sum(1 for s in held if s.outbox.subscriber_count)
    paused = sum(1 for s in held if s.run is not None and s.run.state.waiting)
    return Levels(
        sessions={"connected": connected, "in_memory": len(sessions), "paused": paused},
        bus_queue_depth=bus.queued,
        conversations_owned=bus.owned if bus.clustered else len(sessions),
    )
