"""How `loopwire chat` says the run ended: its exit status."""

from __future__ import annotations

from enum import IntEnum

from backend.protocol import CompletionReason


class ExitCode(IntEnum):
    FINISHED = 0
    """The run finished with an answer (plain runs: it completed)."""
    ERROR = 1
    """An `error` frame, the model failed, or a restart interrupted the run."""
    USAGE = 2
    """Bad arguments or a bad `LOOPWIRE_*` setting."""
    STOPPED = 3
    """Someone stopped the run (another client of the session, or the UI)."""
    MAX_STEPS = 4
    """The step budget, or the run's budget of tokens, cost or time, ran out
    (the answer is the agent's best so far)."""
    REJECTED = 5
    """A tool call was declined and that ended the run."""
    TIMEOUT = 6
    """A question or an approval waited too long for an answer."""
    NO_INPUT = 7
    """The agent needed an answer nobody could give (`--no-input`, or stdin
    ran out): a question stops the run, an approval is declined."""
    CONNECTION = 8
    """No connection: unreachable, the handshake refused, or lost for good."""
    INTERRUPTED = 130
    """Ctrl-C: the run was stopped."""
    PIPE_CLOSED = 141
    """What it printed to was closed (`| head`): the run was stopped, quietly
    (128 + SIGPIPE, as other tools say it)."""


_BY_REASON: dict[CompletionReason, ExitCode] = {
    "finished": ExitCode.FINISHED,
    "stopped": ExitCode.STOPPED,
    "max_steps": ExitCode.MAX_STEPS,
    "budget": ExitCode.MAX_STEPS,
    "rejected": ExitCode.REJECTED,
    "timeout": ExitCode.TIMEOUT,
    "error": ExitCode.ERROR,
    "interrupted": ExitCode.ERROR,
}


def for_reason(reason: CompletionReason) -> ExitCode:
    """The exit status of a run that ended with `agent_completion.reason`."""
    return _BY_REASON[reason]
