"""A conversation's `Inbox`: messages sent while a run works
(`chat.when_busy`), kept until used (`chat/held_inputs.py` acts on them).

- `queue`: runs after the active run, in the order sent;
- `interrupt`: the active run stops after its current phase, and this runs
  before anything queued;
- `steer`: told to the active run at its next phase boundary (where no
  tool call of its step is still open), as the user's words in its history
  (`agent_interjection`); a run that is not an agent loop has no such
  boundary, so the message is queued instead. A steer the run ends before
  using runs next, as if queued.

Each is stored (`pending_inputs`) before the sender is answered, and
deleted in the batch that uses it: a run's start, or the checkpoint after
a steer was told. So a message held survives a restart and is used once:
a conversation that comes back with inputs takes its steers into its
continued run, or starts the next input (`after_recovery`).

Every change is told to the conversation's clients as `pending_input`
(`frame`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from backend.protocol import ChatMessage, PendingInput
from backend.store.records import InputMode, PendingInputRecord

InputState = Literal["queued", "started", "cancelled"]
LIMIT = 10
"""Inputs a conversation may hold at once."""


@dataclass(frozen=True, slots=True)
class Held:
    id: str
    mode: InputMode
    message: ChatMessage
    position: float
    created_at: float

    def record(self) -> PendingInputRecord:
        return PendingInputRecord(
            id=self.id,
            mode=self.mode,
            message=self.message.model_dump(mode="json"),
            position=self.position,
            created_at=self.created_at,
        )

    @classmethod
    def of(cls, record: PendingInputRecord) -> Held:
        return cls(
            id=record.id,
            mode=record.mode,
            message=ChatMessage.model_validate(record.message),
            position=record.position,
            created_at=record.created_at,
        )


class Inbox:
    """One conversation's held inputs, in the order they are used."""

    def __init__(self, records: list[PendingInputRecord] | None = None) -> None:
        self._held = [Held.of(record) for record in records or ()]
        self._held.sort(key=lambda held: held.position)

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[Held]:
        return iter(list(self._held))

    def add(self, held: Held) -> None:
        self._held.append(held)
        self._held.sort(key=lambda item: item.position)

    def get(self, input_id: str) -> Held | None:
        return next((held for held in self._held if held.id == input_id), None)

    def remove(self, input_id: str) -> Held | None:
        held = self.get(input_id)
        if held is not None:
            self._held.remove(held)
        return held

    def first(self) -> Held | None:
        return self._held[0] if self._held else None

    def front(self, now: float) -> float:
        """A position before every held input."""
        return min((held.position for held in self._held), default=now) - 1.0

    def place(self, input_id: str) -> int:
        """How many inputs are used before this one."""
        return next((n for n, held in enumerate(self._held) if held.id == input_id), 0)


def frame(
    held: Held,
    state: InputState,
    *,
    place: int = 0,
    run_id: str | None = None,
    reason: str | None = None,
) -> PendingInput:
    """The `pending_input` frame of `held` in `state`."""
    return PendingInput(
        input_id=held.id,
        mode=held.mode,
        content=held.message.content,
        agent_mode=held.message.agent_mode,
        state=state,
        position=place,
        started_run_id=run_id,
        reason=reason,
    )
