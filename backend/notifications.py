"""The ONLY place that turns events into server frames.

`Notifications` belongs to one session: it stamps every frame with the
envelope (`seq`, `session_id`, `run_id`, `ts`) and hands it to a `Notifier`
(the session's outbox, which logs it for replay and fans it out to the
connected clients). Producers elsewhere call its methods or `agent_event`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from backend import events as ev
from backend.llm.base import Usage
from backend.protocol import (
    AgentCompletionUpdate,
    AgentDuplicateCallUpdate,
    AgentErrorUpdate,
    AgentMaxStepsReachedUpdate,
    AgentObserveUpdate,
    AgentReasonUpdate,
    AgentRequestInputTimeoutUpdate,
    AgentRequestInputUpdate,
    AgentStartUpdate,
    AgentStepsGrantedUpdate,
    AgentStoppedUpdate,
    AgentTurnStartUpdate,
    ChatResponse,
    CompletionReason,
    ErrorFrame,
    ErrorType,
    ResponseComplete,
    ServerInfo,
    ServerMessage,
    SessionReady,
    SessionReset,
    TokenStream,
    ToolApprovalRequest,
    ToolComplete,
    ToolErrorFrame,
    ToolStart,
    UsageInfo,
)


class Notifier(Protocol):
    """Where stamped frames go."""

    def deliver(self, frame: ServerMessage) -> None: ...


class Notifications:
    def __init__(
        self,
        session_id: str,
        notifier: Notifier,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.session_id = session_id
        self.run_id: str | None = None
        self._notifier = notifier
        self._clock = clock
        self._seq = 0

    @property
    def last_seq(self) -> int:
        return self._seq

    def _envelope(self) -> dict[str, Any]:
        self._seq += 1
        return {
            "seq": self._seq,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "ts": self._clock(),
        }

    def _send(self, frame: ServerMessage) -> None:
        self._notifier.deliver(frame)

    # ------------------------------------------------------------ session

    def session_ready(
        self, *, resumed: bool, info: ServerInfo, oldest_seq: int = 0
    ) -> SessionReady:
        """The handshake frame (seq 0, not logged): returned, not delivered."""
        return SessionReady(
            seq=0,
            session_id=self.session_id,
            run_id=self.run_id,
            ts=self._clock(),
            resumed=resumed,
            last_seq=self._seq,
            oldest_seq=oldest_seq,
            **info.model_dump(exclude={"protocol"}),
        )

    def session_reset(self) -> None:
        self._send(SessionReset(**self._envelope()))

    def error(
        self, message: str, error_type: ErrorType, *, in_run: bool = False
    ) -> None:
        """An error frame; `run_id` stays null unless the run itself failed."""
        envelope = self._envelope()
        if not in_run:
            envelope["run_id"] = None
        self._send(ErrorFrame(**envelope, message=message, error_type=error_type))

    # ------------------------------------------------------------ run ends

    def chat_response(self, message: str) -> None:
        self._send(ChatResponse(**self._envelope(), message=message))

    def response_complete(self) -> None:
        self._send(ResponseComplete(**self._envelope()))

    def agent_stopped(self, step: int, mode: ev.StopMode) -> None:
        self._send(AgentStoppedUpdate(**self._envelope(), step=step, mode=mode))

    def agent_completion(
        self, *, steps: int, reason: CompletionReason, usage: Usage, duration_ms: float
    ) -> None:
        self._send(
            AgentCompletionUpdate(
                **self._envelope(),
                steps=steps,
                reason=reason,
                usage=UsageInfo(**usage.model_dump()),
                duration_ms=round(duration_ms, 3),
            )
        )

    # ------------------------------------------------------------ events

    def agent_event(self, event: ev.Event) -> None:
        """Map one internal event to its frame and send it."""
        self._send(self._frame_for(event))

    def _frame_for(self, event: ev.Event) -> ServerMessage:
        env = self._envelope()
        match event:
            case ev.AgentStarted(max_steps, strategy):
                return AgentStartUpdate(**env, max_steps=max_steps, strategy=strategy)
            case ev.TurnStarted(step, max_steps):
                return AgentTurnStartUpdate(**env, step=step, max_steps=max_steps)
            case ev.Reasoned(step, content, control):
                return AgentReasonUpdate(
                    **env, step=step, content=content, control=control
                )
            case ev.InputRequested(step, question, question_id, timeout_s):
                return AgentRequestInputUpdate(
                    **env,
                    step=step,
                    question=question,
                    question_id=question_id,
                    timeout_s=timeout_s,
                )
            case ev.InputTimedOut(step, question_id):
                return AgentRequestInputTimeoutUpdate(
                    **env, step=step, question_id=question_id
                )
            case ev.Observed(step, content, control):
                return AgentObserveUpdate(
                    **env, step=step, content=content, control=control
                )
            case ev.DuplicateCall(step, tool_name):
                return AgentDuplicateCallUpdate(**env, step=step, tool_name=tool_name)
            case ev.StepsGranted(granted, max_steps):
                return AgentStepsGrantedUpdate(
                    **env, granted=granted, max_steps=max_steps
                )
            case ev.MaxStepsReached(steps):
                return AgentMaxStepsReachedUpdate(**env, steps=steps)
            case ev.AgentFailed(message):
                return AgentErrorUpdate(**env, message=message)
            case _:
                return self._tool_frame(event, env)

    def _tool_frame(self, event: ev.Event, env: dict[str, Any]) -> ServerMessage:
        match event:
            case ev.ToolStarted(call_id, name, arguments, step):
                return ToolStart(
                    **env,
                    tool_call_id=call_id,
                    tool_name=name,
                    arguments=arguments,
                    step=step,
                )
            case ev.ToolCompleted(call_id, name, result, duration_ms, step):
                return ToolComplete(
                    **env,
                    tool_call_id=call_id,
                    tool_name=name,
                    result=result,
                    duration_ms=duration_ms,
                    step=step,
                )
            case ev.ToolFailed(call_id, name, error, status, duration_ms, step):
                return ToolErrorFrame(
                    **env,
                    tool_call_id=call_id,
                    tool_name=name,
                    error=error,
                    status=status,
                    duration_ms=duration_ms,
                    step=step,
                )
            case ev.ApprovalRequested(call_id, name, arguments, description, step):
                return ToolApprovalRequest(
                    **env,
                    tool_call_id=call_id,
                    tool_name=name,
                    arguments=arguments,
                    description=description,
                    step=step,
                )
            case ev.TokenStreamed(token, is_first, is_last):
                return TokenStream(
                    **env, token=token, is_first=is_first, is_last=is_last
                )
        raise TypeError(f"no frame for event {event!r}")
