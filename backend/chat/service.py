"""`ChatService`: sessions, history, and one run per session.

Transports hand it typed client messages; it answers through each session's
`Notifications`. A `chat` starts a run as a task in the service's TaskGroup
(never detached): plain chat and tool use are handled here by
`Conversation`, agent mode is delegated to an injected `AgentLoop`. Stop is
enforced here, at the outermost layer: the run is raced against its stop
event, so whatever is in flight is cancelled, and the stop becomes a
`stopped` outcome exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from types import TracebackType

from backend.agent.loop import AgentContext, AgentLoop, AgentResult, RunControl
from backend.aio import race
from backend.chat.conversation import Conversation
from backend.chat.session import ActiveRun, Session
from backend.errors import Busy, InvalidMessage, ProtocolError
from backend.llm.base import LLMClient, Message
from backend.protocol import (
    AgentControlMessage,
    AgentUserInputMessage,
    ChatMessage,
    ClientMessage,
    Limits,
    ResetSessionMessage,
    ServerInfo,
    SessionReady,
    ToolApprovalResponseMessage,
    ToolEffectInfo,
    ToolInfo,
)
from backend.settings import Settings
from backend.tools.base import AnyTool, ToolRegistry
from backend.tools.executor import CANCELLED_NOTE

log = logging.getLogger(__name__)

SESSION_IDLE_TTL_S = 3600.0


class ChatService:
    def __init__(
        self,
        *,
        llm: LLMClient,
        registry: ToolRegistry,
        conversation: Conversation,
        loops: Mapping[str, AgentLoop],
        settings: Settings,
    ) -> None:
        if settings.agent_loop_strategy not in loops:
            raise ValueError(
                f"unknown default loop strategy {settings.agent_loop_strategy!r}"
            )
        self.llm = llm
        self.registry = registry
        self.conversation = conversation
        self.loops = dict(loops)
        self.settings = settings
        self.sessions: dict[str, Session] = {}
        self._tasks: asyncio.TaskGroup | None = None

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ChatService:
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for session in self.sessions.values():
            if session.run is not None:
                session.run.control.stop("immediate")
        tasks, self._tasks = self._tasks, None
        if tasks is not None:
            await tasks.__aexit__(exc_type, exc, tb)

    # ------------------------------------------------------------ sessions

    def open_session(self, session_id: str | None = None) -> tuple[Session, bool]:
        """The session to attach to: the named one if it exists, else a new one."""
        self._forget_idle_sessions()
        if session_id and session_id in self.sessions:
            session = self.sessions[session_id]
            session.touch()
            return session, True
        session = Session(uuid.uuid4().hex, max_frames=self.settings.event_log_size)
        self.sessions[session.id] = session
        return session, False

    def server_info(self) -> ServerInfo:
        settings = self.settings
        limits = Limits(
            max_steps_cap=settings.agent_max_steps_cap,
            default_max_steps=settings.agent_max_steps,
            max_message_bytes=settings.max_message_bytes,
        )
        return ServerInfo(
            limits=limits,
            model=self.llm.model,
            provider=self.llm.provider,
            tools=[_tool_info(tool) for tool in self.registry],
            strategies=list(self.loops),
        )

    def ready_frame(self, session: Session, *, resumed: bool) -> SessionReady:
        return session.notify.session_ready(
            resumed=resumed,
            info=self.server_info(),
            oldest_seq=session.outbox.oldest_seq,
        )

    def _forget_idle_sessions(self) -> None:
        cutoff = time.monotonic() - SESSION_IDLE_TTL_S
        idle = [
            sid
            for sid, s in self.sessions.items()
            if s.run is None
            and s.outbox.subscriber_count == 0
            and s.last_active < cutoff
        ]
        for sid in idle:
            del self.sessions[sid]

    # ------------------------------------------------------------ messages

    def handle(self, session: Session, message: ClientMessage) -> None:
        """Act on one client message; protocol errors become `error` frames."""
        session.touch()
        try:
            self._dispatch(session, message)
        except ProtocolError as exc:
            session.notify.error(str(exc), exc.error_type)  # type: ignore[arg-type]

    def _dispatch(self, session: Session, message: ClientMessage) -> None:
        match message:
            case ChatMessage():
                self._start_run(session, message)
            case AgentControlMessage():
                self._control(session, message)
            case AgentUserInputMessage(content=content, question_id=question_id):
                session.submit_answer(content, question_id)
            case ToolApprovalResponseMessage(
                tool_call_id=call_id, approved=ok, reason=why
            ):
                session.resolve_approval(call_id, ok, why)
            case ResetSessionMessage():
                self._reset(session)

    def _control(self, session: Session, message: AgentControlMessage) -> None:
        run = session.active_run()
        if message.action == "grant_steps":
            if not run.agent_mode:
                raise InvalidMessage("grant_steps applies to agent-mode runs only")
            assert message.steps is not None
            run.control.grant(message.steps, session.notify.agent_event)
        elif message.action == "stop":
            run.control.stop("immediate")
        else:
            run.control.stop("after_step")

    def _reset(self, session: Session) -> None:
        if session.run is not None:
            raise Busy("cannot reset the session while a run is active; stop it first")
        session.history.clear()
        session.notify.session_reset()

    def _start_run(self, session: Session, message: ChatMessage) -> None:
        if session.run is not None:
            raise Busy(
                f"a run is already active in this session ({session.run.run_id}); "
                "wait for response_complete or stop it"
            )
        self._check_request(message)
        if self._tasks is None:
            raise RuntimeError("ChatService used outside `async with`")
        steps = self.settings.clamp_steps(message.agent_max_steps)
        control = RunControl(
            max_steps=steps, max_steps_cap=self.settings.agent_max_steps_cap
        )
        run = ActiveRun(uuid.uuid4().hex, control, message.agent_mode)
        session.run = run
        run.task = self._tasks.create_task(self._drive(session, run, message))

    def _check_request(self, message: ChatMessage) -> None:
        strategy = message.loop_strategy
        if strategy is not None and strategy not in self.loops:
            known = ", ".join(self.loops)
            raise InvalidMessage(
                f"unknown loop_strategy {strategy!r}; available: {known}"
            )
        unknown = [n for n in message.selected_tools or () if n not in self.registry]
        if unknown:
            known = ", ".join(self.registry.names) or "none"
            names = ", ".join(unknown)
            raise InvalidMessage(
                f"unknown tool(s) in selected_tools: {names}; available: {known}"
            )

    # ------------------------------------------------------------ runs

    async def _drive(
        self, session: Session, run: ActiveRun, message: ChatMessage
    ) -> None:
        notify = session.notify
        notify.run_id = run.run_id
        session.history.append(Message.user(message.content))
        try:
            if run.agent_mode:
                await self._agent_run(session, run, message)
            else:
                await self.conversation.reply(session, run, message)
        except Exception as exc:  # outermost layer: report, never kill the service
            log.exception("run %s failed", run.run_id)
            notify.error(
                f"internal error: {type(exc).__name__}: {exc}",
                "internal_error",
                in_run=True,
            )
        finally:
            session.history.close_dangling_tool_calls(CANCELLED_NOTE)
            notify.response_complete()
            notify.run_id = None
            session.run = None
            session.touch()

    async def _agent_run(
        self, session: Session, run: ActiveRun, message: ChatMessage
    ) -> None:
        loop = self.loops[message.loop_strategy or self.settings.agent_loop_strategy]
        ctx = AgentContext(
            session_id=session.id,
            run_id=run.run_id,
            question=message.content,
            history=session.history,
            selected_tools=message.selected_tools,
            read_only=message.read_only,
            control=run.control,
            emit=session.notify.agent_event,
            model=message.model,
            temperature=message.temperature,
        )
        won = await race(loop.run(ctx), run.control.stop_now.wait())
        if won is None or won[0] == 1:
            state = ctx.state
            result = AgentResult(None, "stopped", state.step, state.usage, "immediate")
        else:
            result = won[1]
        self._finish_agent_run(session, run, result)

    def _finish_agent_run(
        self, session: Session, run: ActiveRun, result: AgentResult
    ) -> None:
        notify = session.notify
        if result.reason == "stopped":  # dangling tool calls are closed by _drive
            notify.agent_stopped(result.steps, result.stop_mode or "immediate")
        if result.final_answer:
            session.history.append(Message.assistant(result.final_answer))
            notify.chat_response(result.final_answer)
        duration_ms = (time.perf_counter() - run.started) * 1000
        notify.agent_completion(
            steps=result.steps,
            reason=result.reason,
            usage=result.usage,
            duration_ms=duration_ms,
        )


def _tool_info(tool: AnyTool) -> ToolInfo:
    effect = tool.effect
    return ToolInfo(
        name=tool.name,
        description=tool.description,
        effect=ToolEffectInfo(
            read_only=effect.read_only,
            idempotent=effect.idempotent,
            requires_approval=effect.requires_approval,
            finalize=effect.finalize,
        ),
    )
