"""`ModelCalls`: how every strategy talks to the model.

A request is `[system prompt (with the user's custom instructions after
it, `chat/instructions.py`), the client's system prompt if it gave one,
history window, phase prompt]`, the window being the newest history that
fits `history_window_tokens` (`History.window`; the budget bounds the history
part only) and, when the model's context window is known, what the rest of
the request leaves of it (`context_fit`: tool results are shortened and old
steps left out as needed; a request that cannot fit is refused before it is
sent, with `ContextOverflow`). `complete` and `stream` add the reply's
usage to the run state, and `stream` reports the text as `token_stream`
frames (joined per tick by `TokenBatcher`) while keeping its pieces in
the run state (`RunState.stream`), so a stop in mid-stream keeps
what the user already saw. A reasoning model's thinking is sent apart, as
`thinking`, once its call is complete. `final_answer` is the one
final-answer call every strategy shares: the final prompt, tools off,
streamed.
"""

from __future__ import annotations

from collections.abc import Sequence

from backend.agent.config import LoopConfig
from backend.agent.context_fit import fitted_window
from backend.agent.loop import AgentContext
from backend.agent.request_input import REQUEST_INPUT_SPEC
from backend.agent.token_batcher import TokenBatcher
from backend.errors import LLMError
from backend.llm.base import (
    Completion,
    LLMClient,
    LLMRequest,
    Message,
    Purpose,
    TextDelta,
    ToolChoice,
    ToolSpec,
)
from backend.llm.replies.cutoff import ReplyCutOff
from backend.prompts import PromptProvider, ToolLine
from backend.protocol import Thinking, TokenStream
from backend.text import shorten

THINKING_CHARS = 16_000
"""The most of a call's thinking shown (the first part: how it set out)."""


def _offered(
    ctx: AgentContext,
    listed: Sequence[ToolSpec],
    tools: Sequence[ToolSpec],
    tool_choice: ToolChoice | None,
) -> tuple[tuple[ToolSpec, ...], ToolChoice | None]:
    """The tools a request offers, and how the model may choose among them.

    A call that names the run's tools without letting the model call them —
    reason, observe, plan (nothing offered), the final answer (`tool_choice:
    "none"`) — offers the very list the run's act calls offer (`listed`,
    then `request_input` in agent runs, as `ToolCalls.with_request_input`),
    with `tool_choice: "none"`: every call of a run then begins with the
    same tools and system prompt, byte for byte, a prefix the provider's
    prompt cache keeps (a server that is not told `tool_choice` gets no
    tools at all: `wire`)."""
    if not listed or (tools and tool_choice != "none"):
        return tuple(tools), tool_choice
    if ctx.state.request.agent:
        return (*listed, REQUEST_INPUT_SPEC), "none"
    return tuple(listed), "none"


class ModelCalls:
    def __init__(
        self, llm: LLMClient, prompts: PromptProvider, config: LoopConfig
    ) -> None:
        self.llm = llm
        self.prompts = prompts
        self.config = config

    def request(
        self,
        ctx: AgentContext,
        purpose: Purpose,
        prompt: str | None,
        *,
        listed: Sequence[ToolSpec] = (),
        tools: Sequence[ToolSpec] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMRequest:
        """`listed` tools are named in the system prompt; `tools` are offered.

        Fitted to the model's context window when it is known
        (`context_fit`); one that cannot fit raises `ContextOverflow`."""
        request = ctx.state.request
        model = request.model or self.llm.model
        system = self.prompts.system_prompt(
            tools=[ToolLine(s.name, s.description) for s in listed]
        )
        custom = self.prompts.custom_instructions(
            user=request.user_instructions,
            conversation=request.conversation_instructions,
        )
        if custom:  # after the fixed prompt, which stays a cacheable prefix
            system = f"{system}\n\n{custom}"
        tail = (Message.system(prompt),) if prompt else ()
        own = (Message.system(request.system_prompt),) if request.system_prompt else ()
        head = (Message.system(system), *own)
        tools, tool_choice = _offered(ctx, listed, tools, tool_choice)
        window = fitted_window(
            ctx.history,
            since=ctx.state.history_start,
            config=self.config,
            model=model,
            fixed=(*head, *tail),
            tools=tools,
        )
        return LLMRequest(
            messages=(*head, *window, *tail),
            tools=tools,
            tool_choice=tool_choice,
            model=request.model,
            temperature=request.temperature,
            purpose=purpose,
        )

    async def complete(self, ctx: AgentContext, request: LLMRequest) -> Completion:
        try:
            reply = await self.llm.complete(request)
        except ReplyCutOff as exc:  # two calls made, and paid for
            ctx.state.usage += exc.usage
            raise
        ctx.state.usage += reply.usage
        self._thought(ctx, request, reply)
        return reply

    async def stream(self, ctx: AgentContext, request: LLMRequest) -> Completion:
        """The reply, its text streamed to the user as it comes."""
        state = ctx.state
        state.drop_streamed()  # nothing left from an earlier stream
        final: Completion | None = None
        tokens = TokenBatcher(ctx.emit, self.config.token_batch_s)
        keep = state.stream_sink()
        try:
            async for event in self.llm.stream(request):
                if isinstance(event, TextDelta):
                    tokens.add(event.text)
                    keep(event.text)
                else:
                    final = event
        except ReplyCutOff as exc:  # two calls made, and paid for
            state.usage += exc.usage
            raise
        finally:
            tokens.close()  # shown before whatever ends the run
        if final is not None:  # the thinking before the stream's closing frame
            self._thought(ctx, request, final)
        if state.drop_streamed():  # the completion has the whole text
            ctx.emit(TokenStream(token="", is_first=False, is_last=True))
        if final is None:
            raise LLMError("the model's stream ended without a completion")
        state.usage += final.usage
        return final

    def _thought(
        self, ctx: AgentContext, request: LLMRequest, reply: Completion
    ) -> None:
        """A reasoning model's thinking, shown apart (`thinking`)."""
        if reply.reasoning:
            thinking = shorten(reply.reasoning, THINKING_CHARS)
            step = ctx.state.step
            ctx.emit(Thinking(step=step, phase=request.purpose, content=thinking))

    async def final_answer(
        self, ctx: AgentContext, why: str, listed: Sequence[ToolSpec] = ()
    ) -> str:
        """One more call, tools off, streamed: the answer in the model's words."""
        state = ctx.state
        prompt = self.prompts.final_answer_prompt(
            question=state.request.content, why=why, observations=state.observations
        )
        request = self.request(
            ctx,
            "final",
            prompt,
            listed=listed,
            tools=listed,
            tool_choice="none" if listed else None,
        )
        if ctx.final_tokens is not None:
            request = request.model_copy(update={"max_tokens": ctx.final_tokens})
        reply = await self.stream(ctx, request)
        return reply.content.strip()
