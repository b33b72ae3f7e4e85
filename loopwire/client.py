"""`AgentClient`: the typed Python client of protocol v1.

```python
async with AgentClient("ws://127.0.0.1:8000/ws", token=token) as client:
    async for event in client.chat("convert 10 miles", max_steps=5):
        if isinstance(event, AgentRequestInput):
            await client.answer("km")
```

`chat()` yields the run's frames as the protocol's models, in order and each
once (across reconnects too), through `response_complete`; an `error` frame
ends it with `AgentError`. Controls (`stop`, `stop_after_step`,
`grant_steps`, `answer`, `decline`, `approve`) may be called from the loop's
body or from another task. `on_question` / `on_approval` answer without a
person: they are called with the frame before it is yielded. A question may
be declined (`decline()`, or `Declined` from `on_question`); one that a tool
asks names it (`asked_by`: an MCP server), and may send the person to a page
(`url`). An approval may change the call's arguments or always allow the
tool (`approve(..., arguments=, remember=)`, or a `Decision` from
`on_approval`); arguments that do not fit the tool are refused with an
`invalid_answer` `Error`, yielded like a frame since the run goes on waiting
(raised as `AgentError` when the decision was a handler's: nobody else would
make another). An answer, approval or stop that a dropped socket (or an
instance that no longer holds the conversation: `moved`) kept from the run
is sent again after the reconnect, if the replay shows the run still
waiting for it.
"""

from __future__ import annotations

import inspect
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
)
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from backend.protocol import (
    AgentCompletion,
    AgentControlMessage,
    AgentRequestInput,
    AgentRequestInputTimeout,
    AgentStepsGranted,
    AgentStopped,
    AgentUserInputMessage,
    BranchSwitched,
    BudgetLimits,
    ChatMessage,
    ChatResponse,
    CompletionReason,
    Error,
    Remember,
    ResponseComplete,
    SessionReady,
    SwitchBranchMessage,
    ToolApprovalRequest,
    ToolApprovalResponseMessage,
)
from loopwire.branches import branches
from loopwire.connection import (
    INVALID_ANSWER,
    STALE_CONTROL,
    Acted,
    Backoff,
    Connection,
    Event,
    envelope,
)
from loopwire.conversations import conversations
from loopwire.errors import AgentError, ClientError, NoPendingQuestion

T = TypeVar("T")


@dataclass(frozen=True)
class Declined:
    """What `on_question` may return instead of an answer: no answer to
    give. The model hears that the user declined; a tool that asked (an MCP
    server: `asked_by`) is told `decline`, or `cancel` when `dismiss` (the
    question was put aside rather than refused)."""

    dismiss: bool = False


QuestionHandler = Callable[
    [AgentRequestInput],
    str | Declined | Awaitable[str | Declined | None] | None,
]
"""Returns the answer (a `Declined` to decline), or None to leave the
question to the caller."""


@dataclass(frozen=True)
class Decision:
    """What `on_approval` may return instead of a bool: a "yes" that runs
    the call with other `arguments` (checked against the tool's schema) or
    always allows the tool (`remember`: in this `"conversation"`, or for
    this `"user"` in all their conversations), or a "no" with a `reason`
    (the model is told it as the call's result)."""

    approved: bool
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    remember: Remember | None = None


ApprovalHandler = Callable[
    [ToolApprovalRequest],
    bool | Decision | Awaitable[bool | Decision | None] | None,
]
"""Returns whether to run the tool (a bool, or a `Decision`), or None to
leave it to the caller."""


@dataclass(frozen=True)
class RunResult:
    """What `run()` returns: the answer and how the run ended."""

    answer: str | None
    reason: CompletionReason
    """`agent_completion.reason`; a plain run that completes is `finished`."""
    steps: int
    events: tuple[Event, ...]


async def _settle(value: T | Awaitable[T]) -> T:
    """A handler's reply, awaited if the handler was async."""
    if inspect.isawaitable(value):
        return cast(T, await value)
    return value


class AgentClient:
    """A session on a loopwire server: `async with AgentClient(url) as client`."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        session_id: str | None = None,
        on_question: QuestionHandler | None = None,
        on_approval: ApprovalHandler | None = None,
        backoff: Backoff | None = None,
        open_timeout_s: float = 10.0,
        client: str = "python",
    ) -> None:
        self.connection = Connection(
            url,
            token=token,
            session_id=session_id,
            backoff=backoff,
            open_timeout_s=open_timeout_s,
            client=client,
        )
        self._token = token
        self.on_question = on_question
        self.on_approval = on_approval
        self.run_id: str | None = None
        """The run of the latest `chat()`, once its first frame arrived."""
        self.run_open = False
        """A `chat` was sent and its run's end not yet seen."""
        self.pending_question: AgentRequestInput | None = None
        self._approvals: dict[str, ToolApprovalRequest] = {}
        """The run's approval requests seen, by call id."""
        self._handler_decided: str | None = None
        """The call a handler's edited arguments were sent for, until the
        run acts on them (a refusal of them is then raised)."""
        self._receiving = False
        self._turn: object | None = None
        self._abandoned: set[str] = set()

    async def __aenter__(self) -> AgentClient:
        await self.connection.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.connection.close()

    @property
    def ready(self) -> SessionReady:
        return self.connection.ready

    @property
    def session_id(self) -> str:
        return envelope(self.ready).session_id

    @property
    def reconnects(self) -> int:
        return self.connection.reconnects

    async def conversations(
        self, *, origin: str | Iterable[str] | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        """The user's conversations on this server, newest first; only those
        started by `origin`'s kinds of client if given (`conversations`)."""
        return await conversations(
            self.connection.url, token=self._token, origin=origin, limit=limit
        )

    async def branches(self) -> list[dict[str, Any]]:
        """Where this conversation forks: its versions at each fork
        (`loopwire.branches`)."""
        return await branches(self.connection.url, self.session_id, token=self._token)

    async def switch_branch(self, branch_id: str) -> tuple[BranchSwitched, list[Event]]:
        """Show another version of the conversation: branch `branch_id` (one
        of `branches()`) takes the place of the messages from where it
        forks, which become a branch in turn. Returns the `branch_switched`
        event and the restored runs' frames, sent again. Raises
        `AgentError` when the server refuses (a run is active, no such
        branch), `ClientError` while this client reads a run."""
        if self._receiving or self.run_open:
            raise ClientError("a run is open on this client; let it end first")
        message = _validated(
            SwitchBranchMessage, type="switch_branch", branch_id=branch_id
        )
        await self.connection.send(message)
        self._receiving = True
        try:
            frame = await self.connection.receive()
            while not isinstance(frame, BranchSwitched):
                if isinstance(frame, Error):
                    raise AgentError(frame.error_type, frame.message, frame)
                frame = await self.connection.receive()
            resent = [await self.connection.receive() for _ in range(frame.resent)]
        finally:
            self._receiving = False
        return frame, resent

    # ------------------------------------------------------------ a run

    async def chat(
        self,
        content: str,
        *,
        agent: bool = True,
        strategy: str | None = None,
        max_steps: int | None = None,
        tools: list[str] | None = None,
        read_only: bool = False,
        model: str | None = None,
        temperature: float | None = None,
        system_prompt: str | None = None,
        replace_from: str | None = None,
        budget: BudgetLimits | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Send `content` and yield the run's frames through `response_complete`.

        `agent=False` asks for a plain reply (or tool mode with `tools`);
        a `strategy` always means an agent run; `system_prompt` adds
        instructions for this run after the server's own; `replace_from` (a
        run id of this conversation) sends `content` in place of that run's
        message: that run and every later one are set aside as a branch (a
        `RunsRemoved` event says which, before the new run's frames;
        `switch_branch` brings them back); `budget` bounds the run's tokens,
        cost and seconds of work below the server's budget. Raises `AgentError` on an
        `error` frame, or before sending what the protocol refuses. The
        message is sent when the iteration starts. Leaving the loop early
        leaves the run going on the server: `stop()` ends it,
        `wait_for_run_end()` reads what is left of it (and so does the next
        `chat()`, which drops it).
        """
        if self._receiving:
            raise ClientError("another chat() is reading this client; one at a time")
        message = _chat_message(
            content,
            agent_mode=agent or strategy is not None,
            agent_max_steps=max_steps,
            selected_tools=tools,
            loop_strategy=strategy,
            read_only=read_only,
            model=model,
            temperature=temperature,
            system_prompt=system_prompt,
            replace_from=replace_from,
            agent_budget=budget,
        )
        if self.run_open and self.run_id is not None:
            self._abandoned.add(self.run_id)  # left early: skip its late frames
        turn = self._turn = object()
        self.run_id, self.pending_question = None, None
        self._approvals.clear()
        self._handler_decided = None
        self.connection.settle()
        await self.connection.send(message)
        self.run_open = True
        async for event in self._frames(turn):
            yield event

    async def run(self, content: str, **options: Any) -> RunResult:
        """`chat()` to the end, collected: the answer and how it ended."""
        events: list[Event] = []
        answer: str | None = None
        reason: CompletionReason = "finished"
        steps = 0
        async for event in self.chat(content, **options):
            events.append(event)
            if isinstance(event, ChatResponse):
                answer = event.message
            elif isinstance(event, AgentCompletion):
                reason, steps = event.reason, event.steps
        return RunResult(answer, reason, steps, tuple(events))

    async def wait_for_run_end(self) -> None:
        """Read, and drop, what is left of a run this client left early,
        until it ends (`stop()` it first unless it ends by itself)."""
        if self._receiving:
            raise ClientError("a chat() is reading this client; one at a time")
        while self.run_open:
            self._receiving = True
            try:
                frame = await self.connection.receive()
            finally:
                self._receiving = False
            run_id = envelope(frame).run_id
            mine = self.run_id is None or run_id == self.run_id
            if isinstance(frame, ResponseComplete) and mine:
                self._abandoned.discard(run_id)
                self.run_open, self.pending_question = False, None
                self.connection.settle()

    async def _frames(self, turn: object) -> AsyncIterator[Event]:
        while True:
            if self._turn is not turn:
                raise ClientError("a newer chat() has taken over this client")
            self._receiving = True
            try:
                frame = await self.connection.receive()
            finally:
                self._receiving = False
            run_id = envelope(frame).run_id
            if run_id is not None and run_id in self._abandoned:
                if isinstance(frame, ResponseComplete):
                    self._abandoned.discard(run_id)
                continue
            if isinstance(frame, Error) and not self._goes_on(frame):
                if self.run_id is None:
                    self.run_open = False  # refused: no run started
                raise AgentError(frame.error_type, frame.message, frame)
            if run_id is not None and self.run_id is None:
                self.run_id = run_id
            await self._track(frame)
            yield frame
            if isinstance(frame, ResponseComplete):
                return

    def _goes_on(self, error: Error) -> bool:
        """Whether the run goes on after `error`: a control that came too
        late, or a decision refused (the request waits for another) that was
        not a handler's."""
        if error.error_type in STALE_CONTROL:
            return True
        return error.error_type == INVALID_ANSWER and self._handler_decided is None

    async def _track(self, frame: Event) -> None:
        """Note what the run waits for, and let the handlers answer it."""
        call_id = getattr(frame, "tool_call_id", None)
        if call_id is not None and call_id == self._handler_decided:
            self._handler_decided = None  # acted on: decided, run or ended
        if isinstance(frame, AgentRequestInput):
            self.pending_question = frame
            if self.on_question is not None:
                reply = await _settle(self.on_question(frame))
                if isinstance(reply, Declined):
                    await self.decline(dismiss=reply.dismiss)
                elif reply is not None:
                    await self.answer(reply)
        elif isinstance(frame, ToolApprovalRequest):
            self._approvals[frame.tool_call_id] = frame
            if self.on_approval is not None:
                decided = await _settle(self.on_approval(frame))
                if decided is not None:
                    await self._decide(frame.tool_call_id, decided)
        elif isinstance(frame, AgentRequestInputTimeout):
            self.pending_question = None
        elif isinstance(frame, ResponseComplete):
            self.pending_question, self.run_open = None, False
            self.connection.settle()

    # ------------------------------------------------------------ controls

    async def stop(self) -> None:
        """End the run at once (nothing when this client has no run open)."""
        await self._control(
            AgentControlMessage(type="agent_control", action="stop"), until=_ended
        )

    async def stop_after_step(self) -> None:
        """End the run at its next phase boundary."""
        await self._control(
            AgentControlMessage(type="agent_control", action="stop_after_step"),
            until=_ended,
        )

    async def grant_steps(self, steps: int) -> None:
        """Raise the running loop's budget by `steps` (up to the server's cap).
        Not sent again after a reconnect: twice would grant twice."""
        await self._control(
            _validated(
                AgentControlMessage,
                type="agent_control",
                action="grant_steps",
                steps=steps,
            )
        )

    async def grant_budget(
        self,
        *,
        tokens: int | None = None,
        cost_usd: float | None = None,
        time_s: float | None = None,
    ) -> None:
        """Raise the running run's budget by these amounts (up to the
        server's cap and the user's daily remainder). Not sent again after a
        reconnect: twice would grant twice."""
        await self._control(
            _validated(
                AgentControlMessage,
                type="agent_control",
                action="grant_budget",
                budget={"tokens": tokens, "cost_usd": cost_usd, "time_s": time_s},
            )
        )

    async def answer(self, text: str) -> None:
        """Answer the question the agent is waiting on (for a question with a
        `url`, once done on that page: an empty `text`)."""
        await self._reply(content=text)

    async def decline(self, *, dismiss: bool = False) -> None:
        """Give no answer to the question the run waits on: the model hears
        that the user declined it; a tool that asked (`asked_by`) is told
        `decline`, or `cancel` with `dismiss`."""
        await self._reply(action="cancel" if dismiss else "decline")

    async def _reply(self, **fields: Any) -> None:
        """`agent_user_input` for the pending question. A plain answer has
        no `action` (a server before MCP questions knows none)."""
        question = self.pending_question
        if question is None:
            raise NoPendingQuestion("the agent is not waiting for an answer")
        self.pending_question = None
        await self.connection.send(
            _validated(
                AgentUserInputMessage,
                type="agent_user_input",
                question_id=question.question_id,
                **fields,
            ),
            until=_after(question),
        )

    async def _decide(self, call_id: str, decided: bool | Decision) -> None:
        """Send a handler's decision."""
        if isinstance(decided, bool):
            decided = Decision(decided)
        await self.approve(
            call_id,
            decided.approved,
            decided.reason,
            arguments=decided.arguments,
            remember=decided.remember,
        )
        if decided.arguments is not None:
            self._handler_decided = call_id

    async def approve(
        self,
        call_id: str,
        approved: bool,
        reason: str | None = None,
        *,
        arguments: dict[str, Any] | None = None,
        remember: Remember | None = None,
    ) -> None:
        """Allow (or decline, with an optional reason) a tool call that waits.

        With a "yes", `arguments` run the call with these instead of the
        model's: ones that do not fit the tool's schema are refused with an
        `invalid_answer` `Error` event (the request still waits: approve
        again); `remember` (`"conversation"` or `"user"`) always allows the
        tool from now on (`tool_approval_decided` says so). A request
        `in_doubt` is a call that was running when the server running it
        stopped: approving it runs it again, as it was."""
        self._handler_decided = None
        request = self._approvals.get(call_id)
        acted = (
            _after(request)
            if request is not None
            else _later_in_run(self.run_id, self.connection.last_seq)
        )
        await self.connection.send(
            _validated(
                ToolApprovalResponseMessage,
                type="tool_approval_response",
                tool_call_id=call_id,
                approved=approved,
                reason=reason,
                arguments=arguments,
                remember=remember,
                **(
                    {"in_doubt": True}
                    if approved and request is not None and request.in_doubt
                    else {}
                ),
            ),
            until=acted,
            refusable=arguments is not None,
        )

    async def _control(
        self, message: AgentControlMessage, *, until: Acted | None = None
    ) -> None:
        if self.run_open:
            await self.connection.send(message, until=until)


def _ended(frame: Event) -> bool:
    """A stop was acted on: the run stopped, or ended anyway."""
    return isinstance(frame, AgentStopped | ResponseComplete)


def _after(request: AgentRequestInput | ToolApprovalRequest) -> Acted:
    """A decision on `request` was acted on (see `_later_in_run`)."""
    head = envelope(request)
    return _later_in_run(head.run_id, head.seq)


def _later_in_run(run_id: str | None, seq: int) -> Acted:
    """The run's next frame after `seq` shows what became of the decision on
    what it waited for there (the result of the call, the question's
    follow-up, a call in doubt asked about again after a crash, a timeout, a
    stop); only a step grant may come while it still waits."""

    def acted_on(frame: Event) -> bool:
        head = envelope(frame)
        return (
            head.seq > seq
            and head.run_id is not None
            and run_id in (None, head.run_id)
            and not isinstance(frame, AgentStepsGranted)
        )

    return acted_on


M = TypeVar("M", bound=BaseModel)


def _validated(model: type[M], /, **fields: Any) -> M:
    """A client frame, checked as the server will check it."""
    try:
        return model(**fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'message'}: "
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors(include_url=False)
        )
        kind = fields.get("type", model.__name__)
        raise AgentError(
            "invalid_message", f"invalid {kind} message: {problems}"
        ) from exc


def _chat_message(content: str, **fields: Any) -> ChatMessage:
    return _validated(ChatMessage, type="chat", content=content, **fields)
