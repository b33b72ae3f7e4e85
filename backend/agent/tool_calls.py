"""`ToolCalls`: the tool-call phase every tool-using strategy shares.

A strategy hands the model's tool calls to `take`, which records them in
history and queues them in `state.queue`; then each `next(ctx)` settles the
head of the queue, one call per phase, so the driver checks the graceful
stop and checkpoints between calls:

- `request_input` (agent runs): a question for the user
  (`agent/request_input.py`), never a call for the executor.
- a call made before in this run: not run again; the model is told.
- a call that was running when the process died (the run continues from a
  checkpoint) is *in doubt*: a read-only or idempotent tool runs again; a
  tool with `reconcile` says whether it took effect (its result is kept, or
  it runs now); otherwise the user is asked whether to run it again (an
  approval with `in_doubt`), and a "no" reports it as one that may have run.
- otherwise: `tool_start`, the executor's checks, `AwaitApproval` when the
  tool asks first (with the reply's later calls that will ask too, which
  a person may decide at once: `agent/approvals.py`), the call itself,
  then `tool_complete` / `tool_error`.
  A read-only head that runs without asking takes the read-only calls after
  it along, all run at once in one phase (`agent/tool_batch.py`).

A call leaves the queue in the same phase that records its outcome, so a run
continued from a checkpoint never runs a finished call again. What an ending
cuts off is closed by `cutoffs.close_queue`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from backend.agent import (
    approvals,
    citations,
    client_tools,
    elicitations,
    request_input,
    tool_batch,
)
from backend.agent.call_ids import fresh_ids
from backend.agent.config import LoopConfig
from backend.agent.context_fit import fitted_tools
from backend.agent.cutoffs import INTERRUPTED_NOTE
from backend.agent.loop import AgentContext, AwaitApproval, Continue, Decision
from backend.agent.request_input import REQUEST_INPUT_SPEC, is_request_input
from backend.agent.rules import ToolCallRules
from backend.agent.state import (
    Approved,
    Declined,
    InFlight,
    TimedOut,
    WaitOutcome,
)
from backend.agent.tool_batch import tool_context
from backend.agent.tool_reports import decided, note_untrusted, report
from backend.agent.tool_spans import executed
from backend.llm.base import Completion, Message, ToolCall, ToolSpec
from backend.prompts import ResultLine
from backend.protocol import AgentDuplicateCall
from backend.tools.base import ToolRegistry
from backend.tools.executor import (
    CallScope,
    NeedsApproval,
    Ready,
    Refused,
    ToolExecutor,
)
from backend.tools.outcome import ToolOutcome, parse_arguments
from backend.tools.policy import ApprovalDecision
from backend.tools.results import to_json_text
from backend.transcript import EDITED_NOTE

log = logging.getLogger(__name__)


class ToolCalls:
    def __init__(
        self,
        registry: ToolRegistry,
        executor: ToolExecutor,
        config: LoopConfig,
        *,
        model: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`model`: the model a run uses unless it names one (the LLM's)."""
        self.registry = registry
        self.executor = executor
        self.config = config
        self.model = model
        self.rules = ToolCallRules(
            registry,
            max_consecutive_failures=config.max_consecutive_failures,
            max_duplicate_calls=config.max_duplicate_calls,
            on_reject=config.on_reject,
        )
        self._clock = clock

    def offered(self, ctx: AgentContext) -> list[ToolSpec]:
        """The run's tools: selected (None: all), read-only ones if read-only;
        as many as the model's context window has room for, the ones this
        step named first (`context_fit.fitted_tools`)."""
        request = ctx.state.request
        tools = self.registry.available(
            request.selected_tools, read_only=request.read_only
        )
        return list(
            fitted_tools(
                [*(tool.spec() for tool in tools), *request.client_tools],
                config=self.config,
                model=request.model or self.model,
                preferred=ctx.state.record.tools_to_consider,
            )
        )

    def with_request_input(self, ctx: AgentContext) -> list[ToolSpec]:
        """What the model may call: the tools, plus `request_input` in agent runs."""
        specs = self.offered(ctx)
        return [*specs, REQUEST_INPUT_SPEC] if ctx.state.request.agent else specs

    def take(self, ctx: AgentContext, reply: Completion) -> bool:
        """Queue the reply's tool calls (recorded in history); False if none."""
        if not reply.tool_calls:
            return False
        limit = self.config.max_tool_calls_per_step
        requested = reply.tool_calls
        if len(requested) > limit:
            # A run's history stays bounded: the rest are dropped from the
            # reply itself, so every call the model sees has its result.
            log.warning(
                "run %s step %d: the model asked for %d tool calls; only the "
                "first %d run (LOOPWIRE_AGENT_MAX_TOOL_CALLS_PER_STEP)",
                ctx.state.run_id,
                ctx.state.step,
                len(requested),
                limit,
            )
            requested = requested[:limit]
        requested = fresh_ids(requested, ctx.history)
        ctx.history.append(
            Message.assistant(reply.content or None, requested, reply.reasoning)
        )
        ctx.state.queue = list(requested)
        ctx.state.record.results = []
        return True

    # ------------------------------------------------------------ the head

    async def next(self, ctx: AgentContext) -> Decision:
        """Settle the head of the queue (it must not be empty), in up to three
        phases: announce and check it; wait for approval if it asks; run it.

        A call is marked in flight (`tool_start` sent) and checkpointed before
        it runs, in a phase of its own, so a run continued from a checkpoint
        taken while it ran knows it may have run, and does not run it again.
        """
        state = ctx.state
        call = state.queue[0]
        if ctx.resumed:
            elicitations.resumed(ctx)  # a question it asked mid-call
        if is_request_input(ctx, call):
            return self._question(ctx, call)
        if client_tools.is_client_tool(ctx, call):
            return self._client_call(ctx, call)
        resolution = state.take_resolution()
        if resolution is not None:
            return self._approval_decided(ctx, call, resolution)
        flight = state.in_flight
        if flight is not None and flight.tool_call_id == call.id:
            if state.batch:
                return await self._run_batch(ctx)
            if ctx.resumed:
                return await self._in_doubt(ctx, call)
            return await self._run(ctx, call)
        earlier = self.rules.earlier(state, call)
        if earlier is not None:
            return self._duplicate(ctx, call, earlier)
        return self._checked(ctx, call)

    def _checked(self, ctx: AgentContext, call: ToolCall) -> Decision:
        """Announce a new call and check it: refused, asking, or ready to run."""
        state = ctx.state
        self._announce(ctx, call)
        ahead = approvals.ahead_of(state, call)
        if isinstance(ahead, Declined):  # said no before its turn came
            return self._approval_decided(ctx, call, ahead)
        scope = self._scope(ctx)
        match self.executor.check(call, scope):
            case Refused() as refused:
                return self._settle(ctx, self._refused_outcome(ctx, call, refused))
            case NeedsApproval(tool=tool) if approvals.granted(state, tool.name):
                return Continue(stoppable=False)  # allowed: it runs next phase
            case NeedsApproval() if ahead is not None:
                return self._approval_decided(ctx, call, ahead)
            case NeedsApproval(tool=tool):
                also = approvals.upcoming(
                    ctx, executor=self.executor, rules=self.rules, scope=scope
                )
                return AwaitApproval(
                    approvals.request(ctx, call, tool, self._deadline(), also=also)
                )
            case Ready(tool=tool):
                if tool.effect.read_only:
                    self._gather(ctx, scope)  # the read-only calls after it
                return Continue(stoppable=False)

    async def _in_doubt(self, ctx: AgentContext, call: ToolCall) -> Decision:
        """The call was running when the server running it stopped."""
        tool = self.registry.get(call.name)
        if tool is None:
            return self._settle(ctx, self._interrupted(ctx, call))
        if tool.effect.read_only or tool.effect.idempotent:
            return await self._run(ctx, call)  # safe to run again
        if tool.reconcile is not None:
            found = await tool.reconcile(tool_context(ctx))
            if found is not None and found.took_effect:
                return self._settle(ctx, self._reconciled(ctx, call, found.result))
            if found is not None:
                return await self._run(ctx, call)  # it never took effect
        pending = approvals.request(ctx, call, tool, self._deadline(), in_doubt=True)
        return AwaitApproval(pending)

    def _deadline(self) -> float:
        return self._clock() + self.config.approval_timeout_s

    def _reconciled(
        self, ctx: AgentContext, call: ToolCall, result: Any
    ) -> ToolOutcome:
        """A call that took effect before its server stopped: its result."""
        return ToolOutcome(
            call=call,
            arguments=parse_arguments(call.arguments),
            status="ok",
            result=result,
            duration_ms=self._since(ctx),
            step=ctx.state.step,
        )

    def _scope(self, ctx: AgentContext) -> CallScope:
        state = ctx.state
        return CallScope(
            ctx=tool_context(ctx),
            allowed=[spec.name for spec in self.offered(ctx)],
            read_only=state.request.read_only,
            untrusted_read=bool(state.untrusted),
        )

    def _announce(self, ctx: AgentContext, call: ToolCall) -> None:
        tool_batch.announce(ctx, call)
        ctx.state.in_flight = InFlight(tool_call_id=call.id, started_at=self._clock())

    def _gather(self, ctx: AgentContext, scope: CallScope) -> None:
        """Announce the calls that run with the (announced, read-only) head."""
        joining = tool_batch.followers(
            ctx,
            registry=self.registry,
            executor=self.executor,
            rules=self.rules,
            scope=scope,
            limit=self.config.parallel_tool_calls,
        )
        for call in joining:
            tool_batch.announce(ctx, call)
        if joining:
            ctx.state.batch = [ctx.state.queue[0].id, *(c.id for c in joining)]

    async def _run_batch(self, ctx: AgentContext) -> Decision:
        """Run the announced batch at once (again, after a restart: they are
        read-only), then settle each in the model's order."""
        state = ctx.state
        calls = state.queue[: len(state.batch)]
        assert [call.id for call in calls] == state.batch, "the batch heads the queue"
        outcomes = await tool_batch.run_at_once(
            ctx,
            calls,
            registry=self.registry,
            executor=self.executor,
            scope=self._scope(ctx),
            clock=self._clock,
            asking_s=self.config.request_input_timeout_s,
        )
        decisions = [self._settle(ctx, outcome) for outcome in outcomes]
        state.batch = []
        ending = [d for d in decisions if not isinstance(d, Continue)]
        return ending[0] if ending else Continue()

    def _approval_decided(
        self, ctx: AgentContext, call: ToolCall, resolution: WaitOutcome
    ) -> Decision:
        pending, ctx.state.pending_approval = ctx.state.pending_approval, None
        match resolution:
            case Approved(arguments=edited, remember=remember):
                if edited is not None or remember is not None:  # worth a frame
                    ctx.emit(decided(call, ctx.state.step, edited, remember))
                if edited is not None:
                    ctx.state.edited[call.id] = edited
                    ctx.state.queue[0] = call.model_copy(
                        update={"arguments": to_json_text(edited)}
                    )
                return Continue(stoppable=False)  # it runs in the next phase
            case Declined() | TimedOut() if pending is not None and pending.in_doubt:
                return self._settle(ctx, self._interrupted(ctx, call))
            case Declined(reason=reason):
                decision = ApprovalDecision("rejected", reason)
            case TimedOut():
                decision = ApprovalDecision("timeout")
            case _:
                raise AssertionError(f"unexpected approval outcome {resolution!r}")
        refused = self.executor.declined(
            call.name, decision, waited_s=self.config.approval_timeout_s
        )
        return self._settle(ctx, self._refused_outcome(ctx, call, refused))

    async def _run(self, ctx: AgentContext, call: ToolCall) -> Decision:
        """Run an announced call that passed its checks (and approval)."""
        check = self.executor.check(call, self._scope(ctx), approved=True)
        if not isinstance(check, Ready):
            assert isinstance(check, Refused)
            return self._settle(ctx, self._refused_outcome(ctx, call, check))
        asking_s = self.config.request_input_timeout_s
        context = tool_context(ctx, asking_s=asking_s)
        outcome = await executed(ctx, self.executor, check, call, context)
        duration = {"duration_ms": self._since(ctx)}
        return self._settle(ctx, outcome.model_copy(update=duration))

    def _refused_outcome(
        self, ctx: AgentContext, call: ToolCall, refused: Refused
    ) -> ToolOutcome:
        return ToolOutcome(
            call=call,
            arguments=parse_arguments(call.arguments),
            status=refused.status,
            error=refused.error,
            duration_ms=self._since(ctx),
            step=ctx.state.step,
        )

    def _interrupted(self, ctx: AgentContext, call: ToolCall) -> ToolOutcome:
        """A call that was running when its process died (the run continues
        from a checkpoint): it may have run, so it is not run again."""
        refused = Refused("cancelled", INTERRUPTED_NOTE.format(name=call.name))
        return self._refused_outcome(ctx, call, refused)

    def _since(self, ctx: AgentContext) -> float:
        flight = ctx.state.in_flight
        started = flight.started_at if flight is not None else self._clock()
        return round(max(self._clock() - started, 0.0) * 1000, 3)

    # ------------------------------------------------------------ outcomes

    def _settle(self, ctx: AgentContext, outcome: ToolOutcome) -> Decision:
        """Report and record a finished call, and take it off the queue."""
        state, call = ctx.state, outcome.call
        ctx.emit(report(outcome))
        ctx.telemetry.metrics.tool_call(
            client_tools.counted_as(ctx, call), outcome.status
        )
        if outcome.ok:
            tool = self.registry.get(call.name)
            citations.collect(state, tool, outcome.result)
            note_untrusted(state, tool, outcome)
        self.rules.record(state, outcome)
        extra = ""
        if outcome.status == "rejected" and self.config.on_reject == "continue":
            extra = "\nDo not call it again; continue without it."
        edited = state.edited.get(call.id)
        if edited is not None:
            changed = json.dumps(edited, ensure_ascii=False)
            extra += f"{EDITED_NOTE}{changed})"
        message = outcome.message(self.config.tool_result_max_chars, extra=extra)
        ctx.history.append(message)
        for note in outcome.notes:
            ctx.history.append(Message.system(note))
        status = "ok" if outcome.ok else f"error: {outcome.status}"
        arguments = to_json_text(outcome.arguments)
        line = ResultLine(
            name=call.name,
            status=status,
            arguments=arguments,
            content=message.content or "",
        )
        state.record.results.append(line)
        self._pop(ctx)
        return self.rules.judge(state, outcome)

    def _duplicate(
        self, ctx: AgentContext, call: ToolCall, earlier: ToolOutcome
    ) -> Decision:
        """Never run the same call twice in a run: tell the model instead."""
        state = ctx.state
        ctx.emit(AgentDuplicateCall(step=state.step, tool_name=call.name))
        ctx.telemetry.metrics.tool_call(client_tools.counted_as(ctx, call), "duplicate")
        content = (
            f"Duplicate call: {call.name} was already called with the same arguments "
            f"in step {earlier.step}, so it was not run again. Use that result:\n"
            f"{earlier.for_model(self.config.tool_result_max_chars)}"
        )
        ctx.history.append(Message.tool(call.id, call.name, content, "not_run"))
        arguments = to_json_text(parse_arguments(call.arguments))
        line = ResultLine(
            name=call.name, status="duplicate", arguments=arguments, content=content
        )
        state.record.results.append(line)
        self._pop(ctx)
        return self.rules.after_duplicate(state)

    def _pop(self, ctx: AgentContext) -> None:
        state = ctx.state
        call = state.queue.pop(0)
        state.in_flight = state.asked_in_call = None
        state.decided_ahead.pop(call.id, None)

    def _client_call(self, ctx: AgentContext, call: ToolCall) -> Decision:
        """A call of a client tool: announced, then a wait for the client's
        result (a duplicate is not sent again); the result settles it."""
        state = ctx.state
        pending = state.pending_question
        if pending is not None and state.resolution is not None:
            outcome = client_tools.outcome(ctx, call, pending, state.take_resolution())
            timed = outcome.model_copy(update={"duration_ms": self._since(ctx)})
            return self._settle(ctx, timed)
        earlier = self.rules.earlier(state, call)
        if earlier is not None:
            return self._duplicate(ctx, call, earlier)
        self._announce(ctx, call)
        timeout = self.config.request_input_timeout_s
        return client_tools.ask(ctx, call, timeout, self._clock())

    def _question(self, ctx: AgentContext, call: ToolCall) -> Decision:
        pending = ctx.state.pending_question
        if ctx.state.resolution is None or pending is None:
            timeout = self.config.request_input_timeout_s
            return request_input.ask(ctx, call, timeout, self._clock())
        return request_input.settle(ctx, call, pending)
