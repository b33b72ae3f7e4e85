"""`RunRequests`: a `chat` message, checked and made a `RunState`.

Which strategy serves it (`loop_strategy` if named, else by mode: plain →
`llm_only`, tools selected → `act`, `agent_mode` → the configured default,
data sources named and nothing else → `retrieve`), which tools, model and
instructions it may use, and its step budget. A request that cannot be
served is refused with an `InvalidMessage` naming what is allowed; nothing
is started.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from backend.agent import client_tools
from backend.agent.budget_meter import as_limits, from_limits
from backend.agent.loop import AgentLoop
from backend.agent.registry import StrategyRegistry
from backend.agent.request_input import REQUEST_INPUT
from backend.agent.state import RunRequest, RunState
from backend.budget import Budget
from backend.chat.data_sources import (
    RETRIEVE,
    SEARCH_TOOL,
    chosen_sources,
    wants_retrieval,
    with_search,
)
from backend.errors import InvalidMessage, client_names
from backend.llm.base import LLMClient
from backend.llm.offline import PROVIDER as OFFLINE
from backend.protocol import ChatMessage, Limits, ServerInfo, ToolEffectInfo, ToolInfo
from backend.settings import Settings
from backend.tools.base import AnyTool, ToolRegistry

PLAIN = "llm_only"
"""The strategy of a plain chat (no agent mode, no tools): one streamed reply."""
TOOL_MODE = "act"
"""The strategy of a chat with tools selected but no agent mode."""


class Conversation(Protocol):
    """Whose run it is: the session's id and owner."""

    @property
    def id(self) -> str: ...

    @property
    def owner(self) -> str: ...


class RunRequests:
    def __init__(
        self,
        *,
        llm: LLMClient,
        registry: ToolRegistry,
        strategies: StrategyRegistry,
        settings: Settings,
        data_sources: Sequence[str],
        daily_budgets: Mapping[str, Budget] | None = None,
    ) -> None:
        """`daily_budgets`: users whose budget per day is their own (else
        `settings.daily_budget`)."""
        self.daily_budgets = dict(daily_budgets or {})
        self.llm = llm
        self.registry = registry
        self.strategies = strategies
        self.settings = settings
        self.data_sources = tuple(data_sources)

    @property
    def models(self) -> tuple[str, ...]:
        """What a client may name as `model`: the model in use, then
        `LOOPWIRE_LLM_MODELS`. The built-in offline model is the only one it
        can answer as; `LOOPWIRE_LLM_MODEL` names a model only of the LLM it
        configures (not of the offline one, nor of one given to `create_app`)."""
        if self.llm.provider == OFFLINE:
            return (self.llm.model,)
        configured = self.llm.model == self.settings.llm_model
        listed = self.settings.models if configured else self.settings.listed_models
        return tuple(dict.fromkeys([self.llm.model, *listed]))

    def server_info(self) -> ServerInfo:
        """What a client may ask for here: models, tools, strategies, data
        sources and the limits (the `session_ready` frame's `server`)."""
        settings = self.settings
        limits = Limits(
            max_steps_cap=settings.agent_max_steps_cap,
            default_max_steps=settings.agent_max_steps,
            max_message_bytes=settings.max_message_bytes,
            run_budget=as_limits(settings.run_budget),
            daily_budget=as_limits(settings.daily_budget),
        )
        return ServerInfo(
            limits=limits,
            model=self.llm.model,
            models=list(self.models),
            provider=self.llm.provider,
            tools=[_tool_info(tool) for tool in self.registry],
            strategies=self.strategy_names(),
            data_sources=list(self.data_sources),
        )

    def strategy_names(self) -> list[str]:
        """The strategies, the default agent strategy first (clients show it
        as the default and leave `loop_strategy` out when it is chosen)."""
        default = self.settings.agent_loop_strategy
        loops = [s.name for s in self.strategies if s.loop and s.name != default]
        return [default, *loops]

    def state_for(self, session: Conversation, message: ChatMessage) -> RunState:
        """The run `message` asks for in `session`, or why it cannot be."""
        strategy = self._strategy_for(message)
        unknown = [n for n in message.selected_tools or () if n not in self.registry]
        if unknown:
            known = ", ".join(self.registry.names) or "none"
            raise InvalidMessage(
                f"unknown tool(s) in selected_tools: {client_names(unknown)}; "
                f"available: {known}"
            )
        if (
            message.system_prompt is not None
            and not self.settings.client_system_prompts
        ):
            raise InvalidMessage(
                "this server does not take a system_prompt from clients "
                "(LOOPWIRE_CLIENT_SYSTEM_PROMPTS=false); send the message without it"
            )
        self._check_client_tools(message)
        if message.model is not None and message.model not in self.models:
            raise InvalidMessage(
                f"model {message.model!r} is not offered here; "
                f"choose one of: {', '.join(self.models)}"
            )
        agent = message.agent_mode or message.loop_strategy is not None
        sources = chosen_sources(message, self.data_sources)
        selected = message.selected_tools
        cap = self.settings.run_budget
        if strategy.name == RETRIEVE:
            selected = [SEARCH_TOOL]
        elif sources is not None and selected is not None:
            selected = with_search(selected)
        return RunState(
            run_id=uuid.uuid4().hex,
            session_id=session.id,
            owner=session.owner,
            strategy=strategy.name,
            request=RunRequest(
                content=message.content,
                agent=agent,
                selected_tools=tuple(selected) if selected is not None else None,
                read_only=message.read_only,
                model=message.model,
                temperature=message.temperature,
                save_chat=message.save_chat,
                include_history=message.include_history,
                system_prompt=message.system_prompt,
                data_sources=sources,
                client_tools=client_tools.specs(message.client_tools),
            ),
            max_steps=self._budget(message, strategy.name, agent),
            max_steps_cap=self.settings.agent_max_steps_cap,
            model=message.model or self.llm.model,
            budget=from_limits(message.agent_budget).within(cap),
            budget_cap=cap,
        )

    def _check_client_tools(self, message: ChatMessage) -> None:
        """A client's tool may not take a name the server's tools use."""
        taken = [
            tool.name
            for tool in message.client_tools or ()
            if tool.name in self.registry or tool.name == REQUEST_INPUT
        ]
        if taken:
            raise InvalidMessage(
                f"client_tools: the name(s) {client_names(taken)} are taken by "
                "the server's tools; give the client's tools other names"
            )

    def _strategy_for(self, message: ChatMessage) -> AgentLoop:
        """`loop_strategy` if named, else by mode (see the module docstring)."""
        name = message.loop_strategy
        if name is None:
            if message.agent_mode:
                name = self.settings.agent_loop_strategy
            elif wants_retrieval(message):
                name = RETRIEVE
            else:
                tools = message.selected_tools or message.client_tools
                name = TOOL_MODE if tools else PLAIN
        strategy = self.strategies.get(name)
        if strategy is None or (message.loop_strategy and not strategy.loop):
            known = ", ".join(self.strategy_names())
            raise InvalidMessage(f"unknown loop_strategy {name!r}; available: {known}")
        return strategy

    def _budget(self, message: ChatMessage, strategy: str, agent: bool) -> int:
        if agent:
            return self.settings.clamp_steps(message.agent_max_steps)
        return self.settings.tool_mode_max_rounds if strategy == TOOL_MODE else 0


def _tool_info(tool: AnyTool) -> ToolInfo:
    effect = tool.effect
    return ToolInfo(
        name=tool.name,
        description=tool.description,
        summary=tool.people_summary,
        effect=ToolEffectInfo(
            read_only=effect.read_only,
            idempotent=effect.idempotent,
            requires_approval=effect.asks(untrusted_read=False),
            asks_after_untrusted=effect.asks(untrusted_read=True),
            untrusted_result=effect.untrusted_result,
            finalize=effect.finalize,
        ),
    )
