"""`follow`: one run on the command line, from the `chat` to its exit status.

Each frame is shown as it comes. A question or an approval is answered in a
task of its own (`loopwire.answers`) while frames are still read, because
the pause can end without us: the question times out, someone stops the
run, another client answers. The run's next frame withdraws the prompt.
Ctrl-C (the task cancelled) and an `error` frame stop the run before the
command ends; nothing is left running on the server. An `invalid_answer`
error (edited arguments that do not fit the tool) is shown and the same
request asked again: it still waits. A question may be declined or
dismissed (`/decline`, `/dismiss`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from backend.protocol import (
    AgentCompletion,
    AgentRequestInput,
    AgentStepsGranted,
    BudgetLimits,
    CompletionReason,
    Error,
    ToolApprovalRequest,
)
from loopwire.answers import Answers
from loopwire.client import AgentClient, Decision, Declined
from loopwire.connection import INVALID_ANSWER
from loopwire.errors import AgentError, ClientError
from loopwire.exit_codes import ExitCode, for_reason
from loopwire.terminal import Terminal

STOP_LIMIT_S = 5.0
"""How long telling the server to stop may take when the command ends early."""


UNFINISHED: dict[CompletionReason, str] = {
    "stopped": "the run was stopped",
    "max_steps": "the run ran out of steps",
    "budget": "the run used up its budget",
    "rejected": "the run ended: a tool call was declined",
    "timeout": "the run ended: nobody answered in time",
    "error": "the run failed: the model could not answer",
    "interrupted": "the run was interrupted by a server restart",
    "finished": "the run finished",
}
"""What stderr says when a run ends without finishing."""


@dataclass(frozen=True)
class Request:
    """What to send: the `chat` options the command line gives."""

    message: str
    agent: bool = False
    strategy: str | None = None
    max_steps: int | None = None
    system_prompt: str | None = None
    budget: BudgetLimits | None = None


@dataclass
class _Ending:
    """How the run ended, as far as the exit status is concerned."""

    reason: CompletionReason = "finished"
    no_input: bool = False
    failed: ClientError | None = None
    pipe_closed: bool = False
    """A prompt found stdout's reader gone (`| head`): the group that
    cancels the reading is not a Ctrl-C."""

    def code(self) -> ExitCode:
        if self.failed is not None:
            return ExitCode.ERROR
        return ExitCode.NO_INPUT if self.no_input else for_reason(self.reason)


async def follow(
    client: AgentClient, request: Request, terminal: Terminal, answers: Answers
) -> ExitCode:
    """Send `request`, show the run, answer what it asks; how it ended."""
    ending = _Ending()
    lost: ClientError | None = None
    async with asyncio.TaskGroup() as tasks:
        reader = _Reader(client, terminal, answers, ending, tasks)
        try:
            await reader.read(request)
        except asyncio.CancelledError:  # Ctrl-C: the run must not go on
            if not ending.pipe_closed:
                terminal.problem("loopwire: interrupted; stopping the run")
            await _stop_quietly(client)
            raise
        except BrokenPipeError:  # its reader went (`| head`): so does the run
            await _stop_quietly(client)
            raise
        except AgentError as exc:
            terminal.problem(f"loopwire: {exc.error_type}: {exc.message}")
            await _stop_quietly(client)
            if exc.error_type == "invalid_message" and client.run_id is None:
                return ExitCode.USAGE  # the request itself: a bad argument
            return ExitCode.ERROR
        except ClientError as exc:  # raised past the group, not grouped
            lost = exc
        finally:
            reader.withdraw()
    if lost is not None:
        raise lost
    if ending.failed is not None:
        terminal.problem(f"loopwire: {ending.failed}")
    elif not ending.no_input and ending.reason != "finished":
        terminal.problem(f"loopwire: {UNFINISHED[ending.reason]}")
    return ending.code()


class _Reader:
    """Reads the run's frames; keeps at most one prompt open beside it."""

    def __init__(
        self,
        client: AgentClient,
        terminal: Terminal,
        answers: Answers,
        ending: _Ending,
        tasks: asyncio.TaskGroup,
    ) -> None:
        self.client = client
        self.terminal = terminal
        self.answers = answers
        self.ending = ending
        self.tasks = tasks
        self.asking: asyncio.Task[None] | None = None
        self.waiting_on: AgentRequestInput | ToolApprovalRequest | None = None
        """What the prompt asks about, until the pause is over."""

    async def read(self, request: Request) -> None:
        events = self.client.chat(
            request.message,
            agent=request.agent or request.strategy is not None,
            strategy=request.strategy,
            max_steps=request.max_steps,
            system_prompt=request.system_prompt,
            budget=request.budget,
        )
        async for event in events:
            if not isinstance(event, Error | AgentStepsGranted):
                self.withdraw()  # the pause is over, whoever ended it
            self.terminal.show(event)
            if isinstance(event, AgentCompletion):
                self.ending.reason = event.reason
            elif isinstance(event, AgentRequestInput | ToolApprovalRequest):
                self.ask(event)
            elif isinstance(event, Error):
                self.refused(event)

    def refused(self, error: Error) -> None:
        """A decision that did not fit is asked for again: the run waits."""
        if error.error_type == INVALID_ANSWER and self.waiting_on is not None:
            self.ask(self.waiting_on)

    def ask(self, event: AgentRequestInput | ToolApprovalRequest) -> None:
        """Open the prompt for what the run waits on."""
        self.withdraw()
        self.waiting_on = event
        self.asking = self.tasks.create_task(
            _ask(self.client, event, self.terminal, self.answers, self.ending)
        )

    def withdraw(self) -> None:
        """Close the open prompt, if any (a no-op once it was answered)."""
        self.waiting_on = None
        if self.asking is not None:
            self.asking.cancel()
            self.asking = None


async def _ask(
    client: AgentClient,
    event: AgentRequestInput | ToolApprovalRequest,
    terminal: Terminal,
    answers: Answers,
    ending: _Ending,
) -> None:
    """Get the answer (or the decision) and send it; raises only when
    stdout's reader went."""
    try:
        if isinstance(event, AgentRequestInput):
            await _answer(client, event, terminal, answers, ending)
        else:
            await _approve(client, event, terminal, answers, ending)
    except ClientError as exc:
        ending.failed = exc
    except BrokenPipeError:
        ending.pipe_closed = True
        raise


async def _answer(
    client: AgentClient,
    event: AgentRequestInput,
    terminal: Terminal,
    answers: Answers,
    ending: _Ending,
) -> None:
    reply = await answers.answer(event)
    if isinstance(reply, Declined):
        await client.decline(dismiss=reply.dismiss)
        return
    if reply is not None:
        await client.answer(reply)
        return
    terminal.problem(
        f"loopwire: {event.asked_by or 'the agent'} asks “{event.question}” but "
        f"{answers.why_none}; stopping the run"
    )
    ending.no_input = True
    await client.stop()


async def _approve(
    client: AgentClient,
    event: ToolApprovalRequest,
    terminal: Terminal,
    answers: Answers,
    ending: _Ending,
) -> None:
    decision = await answers.approval(event)
    if decision is None:
        terminal.problem(
            f"loopwire: {event.tool_name} needs your approval but "
            f"{answers.why_none}; declining it"
        )
        ending.no_input = True
        decision = Decision(False)
    await client.approve(
        event.tool_call_id,
        decision.approved,
        decision.reason,
        arguments=decision.arguments,
        remember=decision.remember,
    )


async def _stop_quietly(client: AgentClient) -> None:
    """Stop the run if one is open; the command is ending either way."""
    with contextlib.suppress(ClientError, TimeoutError):
        async with asyncio.timeout(STOP_LIMIT_S):
            await client.stop()
