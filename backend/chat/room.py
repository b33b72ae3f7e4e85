"""`Room`: how many sessions memory holds, in all and for each user.

At most `max_sessions` sessions are in memory, and at most
`max_sessions_per_user` of one user's (without sign-in everyone is the user
`local`, so that caps them together). Making room for one more takes, in
this order:

1. idle sessions (no socket, no run, nothing unsaved): let go, the longest
   idle first; they are in the store;
2. runs waiting for their user's answer or approval that nobody watches:
   parked in the store as `waiting` (the run's own task saves it at its
   wait and lets go of it) and their sessions let go; such a run goes on
   when its conversation is next opened;

and if that is not enough, `Busy` — for a user at their own cap, naming it,
so that one user's sessions never refuse another's.

Waiting is also what `sweep` parks on its own: a run that has waited with
nobody watching for `park_waiting_after_s` leaves memory, whoever it is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterable

from backend.chat.session import Session
from backend.errors import Busy
from backend.settings import Settings

PARK_WAIT_S = 5.0
"""How long making room waits for parked runs to be saved and let go."""


def unattended(session: Session) -> bool:
    """A run waits for its user, and no socket, stream or instance watches."""
    run = session.run
    return (
        run is not None
        and run.task is not None
        and run.state.waiting
        and not run.control.suspend
        and session.outbox.subscriber_count == 0
        and not session.watchers
    )


class Room:
    def __init__(
        self,
        settings: Settings,
        sessions: Callable[[str | None], Collection[Session]],
        evict: Callable[[Session], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`sessions(owner)`: the sessions in memory of `owner` (None: all);
        `evict`: let an idle, saved session go (False if it cannot)."""
        self.max_all = settings.max_sessions
        self.max_per_user = settings.max_sessions_per_user
        self.park_after_s = settings.park_waiting_after_s
        self._sessions = sessions
        self._evict = evict
        self._clock = clock
        self.parked = 0
        """Runs parked to make room or by the sweep (for operators' figures)."""

    async def make(self, owner: str | None, *, keep: Session | None = None) -> None:
        """Room for one more session of `owner` (None: not known yet, only
        the server's limit counts). With `keep` (a session just loaded, made
        room for in all already), room for it among its owner's, never by
        letting it go."""
        coming = 0 if keep is not None else 1
        if owner is not None:
            over = len(self._sessions(owner)) + coming - self.max_per_user
            if over > 0 and await self._free(over, owner, keep) < over:
                raise Busy(
                    f"you have {len(self._sessions(owner))} conversations "
                    "working or open at once, the most allowed "
                    "(LOOPWIRE_MAX_SESSIONS_PER_USER); close one or let a run "
                    "finish first"
                )
        over = len(self._sessions(None)) + coming - self.max_all
        if over > 0 and await self._free(over, None, keep) < over:
            raise Busy(
                f"the server holds {len(self._sessions(None))} active sessions, "
                "its limit; try again later"
            )

    async def _free(self, wanted: int, owner: str | None, keep: Session | None) -> int:
        """Let go of up to `wanted` sessions of `owner` (None: anyone's);
        how many went."""
        mine = [s for s in self._sessions(owner) if s is not keep]
        idle = sorted((s for s in mine if s.idle), key=lambda s: s.last_active)
        freed = sum(1 for session in idle[:wanted] if self._evict(session))
        if freed >= wanted:
            return freed
        waiting = sorted(filter(unattended, mine), key=lambda s: s.last_active)
        return freed + await self.park(waiting[: wanted - freed])

    async def sweep(self) -> int:
        """Park every run that has waited unwatched for `park_waiting_after_s`;
        how many left memory."""
        cutoff = self._clock() - self.park_after_s
        return await self.park(
            s for s in self._sessions(None) if s.last_active < cutoff and unattended(s)
        )

    async def park(self, sessions: Iterable[Session]) -> int:
        """Park these sessions' waiting runs, wait for them to be saved, and
        let the sessions go; how many went."""
        parked = list(sessions)
        tasks = []
        for session in parked:
            run = session.run
            assert run is not None and run.task is not None
            run.control.park()
            tasks.append(run.task)
        if not tasks:
            return 0
        await asyncio.wait(tasks, timeout=PARK_WAIT_S)
        gone = sum(1 for s in parked if s.idle and self._evict(s))
        self.parked += gone
        return gone
