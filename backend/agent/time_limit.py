"""A run's time limit, counted in active time.

A run may work for `TimeLimit.active_s` seconds. Only its phases count — the
driver times each one, less any wait for a person inside it — so a run
paused on a question or an approval for an hour loses nothing. The total is
kept in `RunState.active_ms`, so it survives a checkpoint: a run continued
after a restart has only what was left. When the time is up the phase in
flight is cancelled and the model writes the final answer, for which it gets
whatever the budget has left and never less than `TimeLimit.final_answer_s`
(then the run answers without it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from backend.agent.state import RunState
from backend.pauses import Pauses


@dataclass(frozen=True, slots=True)
class TimeLimit:
    active_s: float = 300.0
    """Seconds of work a run may do; waits for the user do not count."""
    final_answer_s: float = 30.0
    """The least time the final answer gets, even when the budget is spent."""

    def why(self) -> str:
        """What the model is told when it must answer because time is up."""
        return (
            f"The run's time limit ({self.active_s:g} seconds of work) ran out "
            "before the loop finished. Answer with what you have found so far, "
            "and say what is still open."
        )


DEFAULT_TIME_LIMIT = TimeLimit()
"""The settings' defaults (`LOOPWIRE_RUN_TIMEOUT_S`, …)."""


class ActiveTime:
    """One run's active time against its `TimeLimit`, measured by `monotonic`."""

    def __init__(
        self,
        state: RunState,
        limit: TimeLimit,
        monotonic: Callable[[], float] = time.perf_counter,
        pauses: Pauses | None = None,
    ) -> None:
        """`pauses`: the run's waits for a person inside a phase, which do
        not count (`backend/pauses.py`)."""
        self.state = state
        self.limit = limit
        self._monotonic = monotonic
        self._pauses = pauses

    @property
    def remaining_s(self) -> float:
        return self.limit.active_s - self.state.active_ms / 1000

    @property
    def spent(self) -> bool:
        return self.remaining_s <= 0

    @property
    def final_answer_s(self) -> float:
        return max(self.remaining_s, self.limit.final_answer_s)

    def start(self) -> Callable[[], float]:
        """Start timing a phase; the function returned stops it, adds its time
        to the run's and returns it in milliseconds."""
        begun = self._monotonic()
        pauses = self._pauses
        paused = pauses.total_s() if pauses is not None else 0.0

        def stop() -> float:
            elapsed_s = self._monotonic() - begun
            if pauses is not None:
                elapsed_s -= pauses.total_s() - paused
            elapsed_ms = max(elapsed_s, 0.0) * 1000
            self.state.active_ms += elapsed_ms
            return elapsed_ms

        return stop
