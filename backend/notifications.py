"""The ONLY place that turns payloads into server frames.

A frame is the envelope (`seq`, `session_id`, `run_id`, `ts`) plus one
payload declared in `backend.protocol`. `Notifications` belongs to one
session: it stamps every payload with the envelope, serialises the frame once
and hands it to a `Notifier` (the session's outbox, which logs it for replay
and fans it out to the connected clients). Runs report through `emit`;
`ChatService` sends the closing frames through the helpers below.

One presentation rule lives here: a *plain* run (a `chat` without
`agent_mode` or `loop_strategy`) shows no `agent_update` frames, only its
tool frames, tokens and answer, whichever strategy serves it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict

from backend.protocol import (
    AgentCompletion,
    AgentStopped,
    BaseAgentUpdate,
    BranchSwitched,
    ChatResponse,
    CompletionReason,
    Error,
    ErrorType,
    FileInfo,
    FilesUpdate,
    PendingInput,
    ResponseComplete,
    RunEvent,
    RunsRemoved,
    ServerInfo,
    ServerPayload,
    SessionReady,
    SessionReset,
    SourceRef,
    StopMode,
    UsageInfo,
)
from backend.transcript import Frame, Usage


class Notifier(Protocol):
    """Where stamped frames go."""

    def deliver(self, frame: Frame) -> None: ...


def stamp(
    payload: ServerPayload,
    *,
    seq: int,
    session_id: str,
    run_id: str | None,
    ts: float,
) -> str:
    """The frame's JSON text: the envelope's fields, then the payload's."""
    head = (
        f'{{"seq":{seq},"session_id":{json.dumps(session_id)},'
        f'"run_id":{json.dumps(run_id)},"ts":{ts!r},'
    )
    return head + payload.model_dump_json()[1:]


class FrameHead(TypedDict):
    """What a frame's reader needs before its payload: `seq`, the run and
    the payload's `type`."""

    seq: int
    run_id: str | None
    type: str


_frame_head: TypeAdapter[FrameHead] = TypeAdapter(FrameHead)


def head_of(text: str) -> FrameHead | None:
    """The head of a frame `stamp` wrote (None for any other text), read
    without the rest of its payload (a tool's result may be long). `stamp`
    writes the envelope first and every payload starts with its `type`;
    inside a JSON string a `"` is escaped, so the first `,"type":"` is the
    payload's, and its value (a name) ends at the next `"`."""
    at = text.find(',"type":"')
    end = text.find('"', at + 9) if at >= 0 else -1
    if end < 0:
        return None
    try:
        return _frame_head.validate_json(text[: end + 1] + "}")
    except ValidationError:
        return None


def outside_session(
    payload: ServerPayload, clock: Callable[[], float] = time.time
) -> str:
    """A frame sent before any session exists (a refused connection): seq 0."""
    return stamp(payload, seq=0, session_id="", run_id=None, ts=clock())


class Notifications:
    def __init__(
        self,
        session_id: str,
        notifier: Notifier,
        *,
        clock: Callable[[], float] = time.time,
        last_seq: int = 0,
    ) -> None:
        self.session_id = session_id
        self.run_id: str | None = None
        self._agent_frames = True
        self._notifier = notifier
        self._clock = clock
        self._seq = last_seq

    @property
    def last_seq(self) -> int:
        return self._seq

    def skip(self, count: int) -> None:
        """Leave `count` seqs unused: frames a crashed process sent but never
        stored may have used them, and a client that saw them must still get
        what comes next (it asks for what follows its last seq)."""
        self._seq += count

    def begin_run(self, run_id: str, *, agent: bool) -> None:
        """Frames from now on belong to `run_id`; `agent` False hides updates."""
        self.run_id = run_id
        self._agent_frames = agent

    def end_run(self) -> None:
        self.run_id = None
        self._agent_frames = True

    # ------------------------------------------------------------ the one table

    def send(self, payload: ServerPayload, *, in_run: bool = True) -> None:
        """Stamp `payload` with the next `seq` and deliver it."""
        if isinstance(payload, BaseAgentUpdate) and not self._agent_frames:
            return
        self._seq += 1
        run_id = self.run_id if in_run else None
        text = stamp(
            payload,
            seq=self._seq,
            session_id=self.session_id,
            run_id=run_id,
            ts=self._clock(),
        )
        self._notifier.deliver(Frame(self._seq, run_id, text))

    def emit(self, event: RunEvent) -> None:
        """What a run reports while it works (the runs' `Emit`)."""
        self.send(event)

    # ------------------------------------------------------------ session

    def session_ready(
        self, *, resumed: bool, info: ServerInfo, oldest_seq: int = 0
    ) -> str:
        """The handshake frame (seq 0, not logged): returned, not delivered."""
        payload = SessionReady(
            resumed=resumed,
            last_seq=self._seq,
            oldest_seq=oldest_seq,
            **info.model_dump(exclude={"protocol"}),
        )
        return stamp(
            payload,
            seq=0,
            session_id=self.session_id,
            run_id=self.run_id,
            ts=self._clock(),
        )

    def session_reset(self) -> None:
        self.send(SessionReset(), in_run=False)

    def runs_removed(self, run_ids: list[str]) -> None:
        """An edit removed these runs (oldest first); outside any run."""
        self.send(RunsRemoved(run_ids=run_ids), in_run=False)

    def branch_switched(self, switched: BranchSwitched, frames: list[Frame]) -> None:
        """A switch of branches (outside any run), then the restored runs'
        `frames` again, each with the next `seq` (their `run_id` kept)."""
        self.send(switched, in_run=False)
        for frame in frames:
            self._seq += 1
            _seq, _, rest = frame.text.partition(",")  # `stamp` puts seq first
            text = f'{{"seq":{self._seq},{rest}'
            self._notifier.deliver(Frame(self._seq, frame.run_id, text))

    def pending_input(self, update: PendingInput) -> None:
        """A message held while a run works changed (`chat/inbox.py`);
        outside any run."""
        self.send(update, in_run=False)

    def files_update(self, files: list[FileInfo], added: list[str]) -> None:
        """The conversation's files changed; outside any run."""
        self.send(FilesUpdate(files=files, added=added), in_run=False)

    def error(
        self,
        message: str,
        error_type: ErrorType,
        *,
        in_run: bool = False,
        about: str | None = None,
        resets_at: float | None = None,
    ) -> None:
        """An error frame; `run_id` stays null unless the run itself failed;
        `about`: what the refused message named; `resets_at`: when a spent
        daily budget starts over."""
        refusal = Error(
            message=message, error_type=error_type, about=about, resets_at=resets_at
        )
        self.send(refusal, in_run=in_run)

    # ------------------------------------------------------------ run ends

    def chat_response(
        self,
        message: str,
        sources: Sequence[SourceRef] = (),
        usage: Usage | None = None,
        cost_usd: float | None = None,
    ) -> None:
        """The answer; `usage`: what the run's calls used, `cost_usd` its
        cost by the price table (None: unknown)."""
        used = None
        if usage is not None:
            used = UsageInfo(**usage.model_dump(), cost_usd=cost_usd)
        self.send(ChatResponse(message=message, sources=list(sources), usage=used))

    def response_complete(self) -> None:
        self.send(ResponseComplete())

    def agent_stopped(self, step: int, mode: StopMode) -> None:
        self.send(AgentStopped(step=step, mode=mode))

    def agent_completion(
        self,
        *,
        steps: int,
        reason: CompletionReason,
        usage: Usage,
        duration_ms: float,
        strategy: str,
        cost_usd: float | None = None,
    ) -> None:
        """`cost_usd`: what `usage` cost by the price table (None: unknown)."""
        self.send(
            AgentCompletion(
                steps=steps,
                reason=reason,
                usage=UsageInfo(**usage.model_dump(), cost_usd=cost_usd),
                duration_ms=round(duration_ms, 3),
                strategy=strategy,
            )
        )
