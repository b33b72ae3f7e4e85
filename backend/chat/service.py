"""`ChatService`: sessions, history, and one run per session.

Transports hand it typed client messages; it answers through each session's
`Notifications`. Every run goes one way, whatever the mode: a `chat` picks a
strategy from the injected `StrategyRegistry` (`loop_strategy`, else by mode:
plain → `llm_only`, tools selected → `act`, `agent_mode` → the configured
default), becomes a `RunState`, and a `RunDriver` runs it as a task in the
service's TaskGroup (never detached). `_finish_run` is the one place that
writes the answer to history and sends a run's closing frames.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from types import TracebackType

from backend.agent.cutoffs import CANCELLED_NOTE
from backend.agent.driver import Checkpoint, RunDriver
from backend.agent.loop import AgentContext, AgentLoop, AgentResult
from backend.agent.registry import StrategyRegistry
from backend.agent.state import RunRequest, RunState
from backend.chat.session import ActiveRun, Session
from backend.errors import Busy, ConfigError, InvalidMessage, ProtocolError
from backend.llm.base import LLMClient, Message
from backend.protocol import (
    AgentControlMessage,
    AgentError,
    AgentStepsGranted,
    AgentUserInputMessage,
    ChatMessage,
    ClientMessage,
    Limits,
    ResetSessionMessage,
    ServerInfo,
    ToolApprovalResponseMessage,
    ToolEffectInfo,
    ToolInfo,
)
from backend.settings import Settings
from backend.tools.base import AnyTool, ToolRegistry

log = logging.getLogger(__name__)

SESSION_IDLE_TTL_S = 3600.0
PLAIN = "llm_only"
"""The strategy of a plain chat (no agent mode, no tools): one streamed reply."""
TOOL_MODE = "act"
"""The strategy of a chat with tools selected but no agent mode."""


class ChatService:
    def __init__(
        self,
        *,
        llm: LLMClient,
        registry: ToolRegistry,
        strategies: StrategyRegistry,
        settings: Settings,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        for needed in (settings.agent_loop_strategy, PLAIN, TOOL_MODE):
            if needed not in strategies:
                known = ", ".join(strategies.names)
                raise ConfigError(
                    f"loop strategy {needed!r} is not registered (known: {known})"
                )
        self.llm = llm
        self.registry = registry
        self.strategies = strategies
        self.settings = settings
        self._checkpoint = checkpoint
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
            strategies=list(self.strategies.names),
        )

    def ready_frame(self, session: Session, *, resumed: bool) -> str:
        """The `session_ready` frame's JSON text for a connection."""
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
            assert message.steps is not None
            self._grant(session, run, message.steps)
        elif message.action == "stop":
            run.control.stop("immediate")
        else:
            run.control.stop("after_step")

    def _grant(self, session: Session, run: ActiveRun, steps: int) -> None:
        """Raise the running loop's budget by `steps`, up to the cap."""
        state = run.state
        if not state.request.agent:
            raise InvalidMessage("grant_steps applies to agent-mode runs only")
        granted = state.grant(steps)
        session.notify.emit(
            AgentStepsGranted(granted=granted, max_steps=state.max_steps)
        )

    def _reset(self, session: Session) -> None:
        if session.run is not None:
            raise Busy("cannot reset the session while a run is active; stop it first")
        session.history.clear()
        session.notify.session_reset()

    # ------------------------------------------------------------ starting runs

    def _start_run(self, session: Session, message: ChatMessage) -> None:
        if session.run is not None:
            raise Busy(
                f"a run is already active in this session ({session.run.run_id}); "
                "wait for response_complete or stop it"
            )
        state = self._new_state(session, message)
        session.history.append(Message.user(message.content))
        self._launch(session, state)

    def resume(self, session: Session, state: RunState) -> None:
        """Continue a run from its state (a checkpoint) and the session's history.

        A run that was waiting for the user waits again without asking twice.
        """
        if session.run is not None:
            raise Busy(
                f"a run is already active in this session ({session.run.run_id})"
            )
        if state.session_id != session.id or state.strategy not in self.strategies:
            raise InvalidMessage(
                f"run {state.run_id} cannot continue here (session "
                f"{state.session_id}, strategy {state.strategy!r})"
            )
        self._launch(session, state)

    def _launch(self, session: Session, state: RunState) -> None:
        if self._tasks is None:
            raise RuntimeError("ChatService used outside `async with`")
        run = ActiveRun(state)
        session.run = run
        run.task = self._tasks.create_task(self._drive(session, run))

    def _new_state(self, session: Session, message: ChatMessage) -> RunState:
        strategy = self._strategy_for(message)
        unknown = [n for n in message.selected_tools or () if n not in self.registry]
        if unknown:
            known = ", ".join(self.registry.names) or "none"
            names = ", ".join(unknown)
            raise InvalidMessage(
                f"unknown tool(s) in selected_tools: {names}; available: {known}"
            )
        agent = message.agent_mode or message.loop_strategy is not None
        selected = message.selected_tools
        return RunState(
            run_id=uuid.uuid4().hex,
            session_id=session.id,
            strategy=strategy.name,
            request=RunRequest(
                content=message.content,
                agent=agent,
                selected_tools=tuple(selected) if selected is not None else None,
                read_only=message.read_only,
                model=message.model,
                temperature=message.temperature,
            ),
            max_steps=self._budget(message, strategy.name, agent),
            max_steps_cap=self.settings.agent_max_steps_cap,
        )

    def _strategy_for(self, message: ChatMessage) -> AgentLoop:
        """`loop_strategy` if named, else by mode (see the module docstring)."""
        name = message.loop_strategy
        if name is None:
            if message.agent_mode:
                name = self.settings.agent_loop_strategy
            else:
                name = TOOL_MODE if message.selected_tools else PLAIN
        strategy = self.strategies.get(name)
        if strategy is None:
            known = ", ".join(self.strategies.names)
            raise InvalidMessage(f"unknown loop_strategy {name!r}; available: {known}")
        return strategy

    def _budget(self, message: ChatMessage, strategy: str, agent: bool) -> int:
        if agent:
            return self.settings.clamp_steps(message.agent_max_steps)
        return self.settings.tool_mode_max_rounds if strategy == TOOL_MODE else 0

    # ------------------------------------------------------------ runs

    async def _drive(self, session: Session, run: ActiveRun) -> None:
        state, notify = run.state, session.notify
        notify.begin_run(state.run_id, agent=state.request.agent)
        strategy = self.strategies.get(state.strategy)
        assert strategy is not None
        ctx = AgentContext(state, session.history, notify.emit)
        driver = RunDriver(strategy, ctx, run.control, checkpoint=self._checkpoint)
        try:
            self._finish_run(session, run, await driver.run())
        except Exception as exc:  # outermost layer: report, never kill the service
            log.exception("run %s failed", state.run_id)
            notify.error(
                f"internal error: {type(exc).__name__}: {exc}",
                "internal_error",
                in_run=True,
            )
        finally:
            session.history.close_dangling_tool_calls(CANCELLED_NOTE)
            notify.response_complete()
            notify.end_run()
            session.run = None
            session.touch()

    def _finish_run(
        self, session: Session, run: ActiveRun, result: AgentResult
    ) -> None:
        """The one ending of every run: history, then the closing frames."""
        notify, state = session.notify, run.state
        agent = state.request.agent
        if result.reason == "stopped" and agent:
            notify.agent_stopped(result.steps, result.stop_mode or "immediate")
        if result.error is not None:
            if agent:
                notify.emit(AgentError(message=result.error))
            else:
                notify.error(result.error, "llm_error", in_run=True)
        if result.answer:
            session.history.append(Message.assistant(result.answer))
            notify.chat_response(result.answer)
        if agent:
            notify.agent_completion(
                steps=result.steps,
                reason=result.reason,
                usage=result.usage,
                duration_ms=(time.time() - state.started_at) * 1000,
                strategy=state.strategy,
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
