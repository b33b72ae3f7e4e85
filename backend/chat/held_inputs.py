"""`HeldInputs`: what a `chat` sent while a run works does (`when_busy`),
and how held inputs are used (`chat/inbox.py` has the rules).

- `hold`: the message is checked as a run of it would be (a refusal now,
  not later), stored, and announced (`pending_input` `queued`); a steer is
  handed to the active run, an interrupt stops it after its phase.
- `cancel`: a held input dropped unused, at its sender's asking.
- `next_run`: after a run ends here, the first held input runs (its start
  and its deletion in one batch).
- `after_recovery`: a conversation back in memory with held inputs hands
  its steers to its continued run, or runs its first input
  (`left_by_the_last_process`: each such conversation, at start-up).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from backend.agent.run_control import Interjection
from backend.chat.inbox import LIMIT, Held, frame
from backend.chat.run_requests import RunRequests
from backend.chat.runs import RunSupervisor
from backend.chat.session import Session
from backend.chat.tool_grants import ToolGrants
from backend.errors import Busy, NoPendingInput, ProtocolError
from backend.protocol import ChatMessage

log = logging.getLogger(__name__)


class HeldInputs:
    def __init__(
        self,
        *,
        requests: RunRequests,
        runs: RunSupervisor,
        grants: ToolGrants,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.requests = requests
        self.runs = runs
        self.grants = grants
        self._clock = clock
        self.draining = False

    async def hold(self, session: Session, message: ChatMessage) -> Held:
        """Keep `message`, sent while `session.run` works."""
        run = session.run
        assert run is not None
        if len(session.inbox) >= LIMIT:
            raise Busy(
                f"this conversation already holds {LIMIT} messages for after "
                "its run; wait, or cancel one"
            )
        self.requests.state_for(session, message)  # what could not run: now
        mode = message.when_busy
        assert mode != "refuse"
        if mode == "steer" and not run.state.request.agent:
            mode = "queue"  # no phase boundary to tell it at
        now = self._clock()
        held = Held(
            id=uuid.uuid4().hex,
            mode=mode,
            message=message,
            position=session.inbox.front(now) if mode == "interrupt" else now,
            created_at=now,
        )
        session.inbox.add(held)
        if session.journal is not None and message.save_chat:
            session.journal.input_held(held.record())
            try:
                await self.runs.stored_now(session)
            except ProtocolError:
                session.inbox.remove(held.id)
                raise
        session.notify.pending_input(
            frame(held, "queued", place=session.inbox.place(held.id))
        )
        if mode == "steer":
            run.control.interjections.append(Interjection(held.id, message.content))
        elif mode == "interrupt":
            run.control.stop("after_step")
        return held

    def cancel(self, session: Session, input_id: str) -> None:
        held = session.inbox.get(input_id)
        run = session.run
        told = run is not None and input_id in run.state.interjected
        if held is None or told:
            raise NoPendingInput(
                f"no held message {input_id!r} (it may have been used already)"
            )
        self._drop(session, held, "cancelled by the user")
        if run is not None:
            run.control.interjections = [
                said for said in run.control.interjections if said.input_id != input_id
            ]

    def _drop(self, session: Session, held: Held, reason: str) -> None:
        session.inbox.remove(held.id)
        if session.journal is not None:
            session.journal.input_used(held.id)
        session.notify.pending_input(frame(held, "cancelled", reason=reason))

    def drop_all(self, session: Session, reason: str) -> None:
        """Every held input dropped (the history was reset)."""
        for held in session.inbox:
            self._drop(session, held, reason)

    async def next_run(self, session: Session) -> None:
        """The first held input runs, if the session is free."""
        while not self.draining and session.run is None:
            held = session.inbox.first()
            if held is None:
                return
            allowed = await self.grants.allowed(session.owner, session.id)
            try:
                spent = await self.runs.daily.today(session.owner)
            except ProtocolError as exc:  # the store is down: it waits, held
                log.warning("session %s: held input waits: %s", session.id, exc)
                return
            if session.run is not None or session.inbox.first() is not held:
                continue  # something else started meanwhile: look again
            try:
                state = self.requests.state_for(session, held.message)
                self.runs.daily.fit(state, spent)
            except ProtocolError as exc:  # e.g. a tool or model gone since
                self._drop(session, held, f"it could not run: {exc}")
                continue
            state.granted = allowed
            session.inbox.remove(held.id)
            if session.journal is not None:
                session.journal.input_used(held.id)
            session.notify.pending_input(frame(held, "started", run_id=state.run_id))
            self.runs.start(session, held.message, state)
            return

    async def after_recovery(self, session: Session) -> None:
        """A conversation back in memory: its continued run gets its
        steers (those it was not told yet); a free one runs its next input."""
        run = session.run
        if run is None:
            await self.next_run(session)
            return
        for held in session.inbox:
            if held.mode == "steer" and held.id not in run.state.interjected:
                run.control.interjections.append(
                    Interjection(held.id, held.message.content)
                )

    async def left_by_the_last_process(self) -> None:
        """Conversations a previous process left with held inputs: each
        used as if just sent (`after_recovery`)."""
        table = self.runs.table
        store = table.store
        assert store is not None
        for conversation_id in await store.live_conversations(parked=False):
            if conversation_id in table.by_id:
                continue  # its runs were continued, and it took what it held
            if await store.live_runs(conversation_id):
                continue  # a parked run: it goes on when its user comes back
            try:
                session = await table.load(conversation_id)
            except Busy:
                continue  # used when the conversation is opened
            if session is not None:
                await self.after_recovery(session)
