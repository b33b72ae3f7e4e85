"""Plain chat and tool use without agent mode.

A plain chat is one streamed LLM call. With tools selected, the model may
call tools for a few rounds (`tool_mode_max_rounds`); each call is executed
and fed back, then the model answers. If the rounds run out, one more call
with `tool_choice: "none"` writes the answer. Stop is enforced by racing the
reply against the run's stop event; text streamed before a stop is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from backend.agent.rules import OnReject
from backend.agent.summary import summarize_outcomes
from backend.aio import race
from backend.chat.session import ActiveRun, Session
from backend.errors import LLMError
from backend.events import TokenStreamed
from backend.llm.base import (
    Completion,
    LLMClient,
    LLMRequest,
    Message,
    TextDelta,
    ToolChoice,
    ToolSpec,
)
from backend.prompts import PromptProvider, ToolLine
from backend.protocol import ChatMessage
from backend.tools.base import ToolContext, ToolRegistry
from backend.tools.executor import CallScope, ToolExecutor, ToolOutcome


@dataclass(frozen=True, slots=True)
class ConversationConfig:
    max_rounds: int = 4
    tool_result_max_chars: int = 4000
    history_window_messages: int = 40
    on_reject: OnReject = "stop"


@dataclass
class _Reply:
    """What one run has produced so far (survives a stop)."""

    read_only: bool = False
    streamed: list[str] = field(default_factory=list)
    outcomes: list[ToolOutcome] = field(default_factory=list)


class Conversation:
    def __init__(
        self,
        llm: LLMClient,
        registry: ToolRegistry,
        executor: ToolExecutor,
        prompts: PromptProvider,
        config: ConversationConfig = ConversationConfig(),
    ) -> None:
        self.llm = llm
        self.registry = registry
        self.executor = executor
        self.prompts = prompts
        self.config = config

    async def reply(
        self, session: Session, run: ActiveRun, message: ChatMessage
    ) -> None:
        """Answer `message` (already in history); ends with `chat_response`."""
        reply = _Reply(read_only=message.read_only)
        try:
            won = await race(
                self._answer(session, run, message, reply), run.control.stop_now.wait()
            )
        except LLMError as exc:
            session.notify.error(str(exc), "llm_error", in_run=True)
            return
        if won is not None and won[0] == 0:
            answer: str = won[1]
        else:
            answer = "".join(reply.streamed).strip()
            if reply.streamed:
                session.notify.agent_event(TokenStreamed("", False, True))
        if answer:
            session.history.append(Message.assistant(answer))
            session.notify.chat_response(answer)

    async def _answer(
        self, session: Session, run: ActiveRun, message: ChatMessage, reply: _Reply
    ) -> str:
        selected = message.selected_tools or []
        tools = self.registry.available(selected, read_only=message.read_only)
        specs = [tool.spec() for tool in tools]
        for round_number in range(1, self.config.max_rounds + 1):
            choice: ToolChoice | None = "auto" if specs else None
            completion = await self._stream(session, message, specs, choice, reply)
            if not (completion.tool_calls and specs):
                return completion.content.strip() or self._fallback(reply)
            if await self._run_tools(
                session, run, completion, specs, round_number, reply
            ):
                break
        completion = await self._stream(session, message, specs, "none", reply)
        return completion.content.strip() or self._fallback(reply)

    async def _run_tools(
        self,
        session: Session,
        run: ActiveRun,
        completion: Completion,
        specs: Sequence[ToolSpec],
        round_number: int,
        reply: _Reply,
    ) -> bool:
        """Run the round's calls; True when a rejection should end the rounds."""
        session.history.append(
            Message.assistant(completion.content or None, completion.tool_calls)
        )
        scope = CallScope(
            ctx=ToolContext(session.id, run.run_id, round_number),
            emit=session.notify.agent_event,
            allowed=[spec.name for spec in specs],
            read_only=reply.read_only,
            approver=run.control,
        )
        stop = False
        for call in completion.tool_calls:
            if stop:
                note = "Not run: an earlier call in this round was declined."
                session.history.append(Message.tool(call.id, call.name, note))
                continue
            outcome = await self.executor.run(call, scope)
            reply.outcomes.append(outcome)
            content = outcome.for_model(self.config.tool_result_max_chars)
            session.history.append(Message.tool(call.id, call.name, content))
            for note in outcome.notes:
                session.history.append(Message.system(note))
            stop = outcome.status == "rejected" and self.config.on_reject == "stop"
        reply.streamed.clear()
        return stop

    async def _stream(
        self,
        session: Session,
        message: ChatMessage,
        specs: Sequence[ToolSpec],
        choice: ToolChoice | None,
        reply: _Reply,
    ) -> Completion:
        request = self._request(session, message, specs, choice)
        emit = session.notify.agent_event
        reply.streamed.clear()
        final: Completion | None = None
        async for event in self.llm.stream(request):
            if isinstance(event, TextDelta):
                if event.text:
                    emit(TokenStreamed(event.text, not reply.streamed, False))
                    reply.streamed.append(event.text)
            else:
                final = event
        if reply.streamed:
            emit(TokenStreamed("", False, True))
        if final is None:
            raise LLMError("the model's stream ended without a completion")
        return final

    def _request(
        self,
        session: Session,
        message: ChatMessage,
        specs: Sequence[ToolSpec],
        choice: ToolChoice | None,
    ) -> LLMRequest:
        system = self.prompts.system_prompt(
            tools=[ToolLine(s.name, s.description) for s in specs]
        )
        window = session.history.window(self.config.history_window_messages)
        return LLMRequest(
            messages=(Message.system(system), *window),
            tools=tuple(specs),
            tool_choice=choice,
            model=message.model,
            temperature=message.temperature,
            purpose="chat",
        )

    def _fallback(self, reply: _Reply) -> str:
        if reply.outcomes:
            return summarize_outcomes(reply.outcomes, 1)
        return "The model returned an empty reply."
