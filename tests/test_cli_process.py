"""`loopwire chat` end to end: the command as a process, against a server
process on the offline model, found through `LOOPWIRE_PORT` alone."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from backend.protocol import server_message_adapter
from loopwire.exit_codes import ExitCode
from tests.server_process import ServerProcess, free_port, server_process
from tests.ws_client import Frame, label

pytestmark = pytest.mark.timeout(120)
LIMIT_S = 30.0
"""No command here may take longer: the old hangs now fail fast."""


def environment(port: int | str, **settings: str) -> dict[str, str]:
    """The caller's environment without LOOPWIRE_* settings, then these."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LOOPWIRE_") and k != "OPENAI_API_KEY"
    }
    env["LOOPWIRE_PORT"] = str(port)
    env.update({f"LOOPWIRE_{k.upper()}": v for k, v in settings.items()})
    return env


@dataclass
class Ran:
    status: int
    out: list[str]
    err: list[str]

    def frames(self) -> list[Frame]:
        """stdout of `--json`: every line one protocol frame."""
        for line in self.out:
            server_message_adapter.validate_json(line)
        return [json.loads(line) for line in self.out]


class Command:
    """`python -m backend …` as a process, in a directory with no `.env`."""

    def __init__(self, cwd: Path, env: dict[str, str], *argv: str) -> None:
        self.cwd, self.env, self.argv = cwd, env, argv
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, **streams: Any) -> asyncio.subprocess.Process:
        pipes = {
            "stdin": asyncio.subprocess.PIPE,
            "stdout": asyncio.subprocess.PIPE,
            "stderr": asyncio.subprocess.PIPE,
        }
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "backend",
            *self.argv,
            cwd=self.cwd,
            env=self.env,
            **{**pipes, **streams},
        )
        return self.process

    async def run(self, stdin: bytes = b"") -> Ran:
        process = await self.start()
        async with asyncio.timeout(LIMIT_S):
            out, err = await process.communicate(stdin)
        return Ran(process.returncode or 0, _lines(out), _lines(err))

    async def line(self) -> str:
        assert self.process is not None and self.process.stdout is not None
        async with asyncio.timeout(LIMIT_S):
            return (await self.process.stdout.readline()).decode()

    async def frames_until(self, name: str) -> list[Frame]:
        frames = [json.loads(await self.line())]
        while label(frames[-1]) != name:
            frames.append(json.loads(await self.line()))
        return frames

    async def finish(self) -> Ran:
        """Output and status once the process ends by itself (its stdin
        stays open until then: closing it would be an answer, "no more")."""
        process = self.process
        assert process is not None and process.stdout and process.stderr
        try:
            async with asyncio.timeout(LIMIT_S):
                out, err, status = await asyncio.gather(
                    process.stdout.read(), process.stderr.read(), process.wait()
                )
        finally:
            if process.stdin is not None:
                process.stdin.close()
        return Ran(status, _lines(out), _lines(err))


def _lines(data: bytes) -> list[str]:
    return data.decode().splitlines()


@pytest_asyncio.fixture(scope="class", loop_scope="class")
async def server() -> AsyncIterator[ServerProcess]:
    """One offline server for the tests of a class (a start costs ~1 s)."""
    async with server_process("sqlite://", llm_provider="offline") as running:
        yield running


@pytest.mark.asyncio(loop_scope="class")
class TestAgainstAServer:
    def chat(self, server: ServerProcess, tmp: Path, *argv: str, **env: str) -> Command:
        return Command(tmp, environment(server.port, **env), "chat", *argv)

    async def test_a_question_answered_from_piped_stdin(
        self, server: ServerProcess, tmp_path: Path
    ) -> None:
        """An agent question is answered from piped stdin and the run prints as text."""
        ran = await self.chat(
            server, tmp_path, "--agent", "convert 10 miles", host="0.0.0.0"
        ).run(b"km\n")
        assert (ran.status, ran.err) == (ExitCode.FINISHED, [])
        assert ran.out[:4] == [
            "— step 1 / 10",
            "  [reason] The request doesn't say which unit to convert 10 miles to, so I'll ask the user.",
            "  ? What unit should I convert 10 miles to?",
            "your answer> km",
        ]
        assert "assistant: 10 miles is **16.0934 km**" in ran.out
        assert ran.out[-2].startswith("(done: finished, 2 step(s), ")

    async def test_json_is_one_frame_per_line(
        self, server: ServerProcess, tmp_path: Path
    ) -> None:
        """`--json` prints each protocol frame as a line; the prompt goes to stderr."""
        command = self.chat(server, tmp_path, "--json", "--agent", "convert 10 miles")
        ran = await command.run(b"km\n")
        assert ran.status == ExitCode.FINISHED
        assert ran.err == ["your answer> km"]
        frames = ran.frames()
        assert [label(f) for f in frames] == [
            "session_ready",
            "agent_start",
            "agent_turn_start",
            "agent_reason",
            "agent_request_input",
            "agent_observe",
            "agent_turn_start",
            "agent_reason",
            "tool_start:convert_units",
            "tool_complete:convert_units",
            "agent_observe",
            "chat_response",
            "agent_completion",
            "response_complete",
        ]
        assert [f["seq"] for f in frames] == list(range(14))

        plain = self.chat(server, tmp_path, "--json", "what is 6*7")
        frames = (await plain.run()).frames()
        assert [label(f) for f in frames] == [
            "session_ready",
            *["token_stream"] * 3,  # the first piece, the rest joined, the end
            "chat_response",
            "response_complete",
        ]

    @pytest.mark.parametrize(
        ("argv", "status", "reason"),
        [
            (["convert 10 miles to km"], ExitCode.FINISHED, "finished"),
            (
                ["--max-steps", "1", "convert 10 miles to km and 5 kg to lb"],
                ExitCode.MAX_STEPS,
                "max_steps",
            ),
            (
                ["--approve", "no", "remember that I parked on level 3"],
                ExitCode.REJECTED,
                "rejected",
            ),
            (["--no-input", "convert 10 miles"], ExitCode.NO_INPUT, "stopped"),
        ],
    )
    async def test_the_exit_status_says_how_the_run_ended(
        self,
        server: ServerProcess,
        tmp_path: Path,
        argv: list[str],
        status: ExitCode,
        reason: str,
    ) -> None:
        """The command's exit status matches the run's completion reason."""
        ran = await self.chat(server, tmp_path, "--json", "--agent", *argv).run()
        assert ran.status == status
        completion = ran.frames()[-2]
        assert (label(completion), completion["reason"]) == (
            "agent_completion",
            reason,
        )

    async def test_stopped_elsewhere_ends_with_its_own_status(
        self, server: ServerProcess, tmp_path: Path
    ) -> None:
        """A run stopped by another client exits with the stopped status."""
        command = self.chat(server, tmp_path, "--json", "--agent", "convert 10 miles")
        await command.start()  # stdin stays open: the command waits for a line
        frames = await command.frames_until("agent_request_input")
        async with AsyncExitStack() as stack:
            query = f"session_id={frames[0]['session_id']}&last_seq={frames[-1]['seq']}"
            other = await server.client(stack, query)
            await other.recv()
            await other.send(type="agent_control", action="stop")
            ran = await command.finish()
        assert ran.status == ExitCode.STOPPED
        rest = [json.loads(line) for line in ran.out]
        assert [label(f) for f in rest] == [
            "agent_stopped",
            "agent_completion",
            "response_complete",
        ]

    async def test_ctrl_c_stops_the_run(
        self, server: ServerProcess, tmp_path: Path
    ) -> None:
        """SIGINT stops the run on the server and exits with the interrupted status."""
        command = self.chat(server, tmp_path, "--json", "--agent", "convert 10 miles")
        process = await command.start()
        frames = await command.frames_until("agent_request_input")
        process.send_signal(signal.SIGINT)
        ran = await command.finish()
        assert ran.status == ExitCode.INTERRUPTED
        assert ran.err == ["loopwire: interrupted; stopping the run"]
        async with AsyncExitStack() as stack:
            query = f"session_id={frames[0]['session_id']}&last_seq={frames[-1]['seq']}"
            other = await server.client(stack, query)
            await other.recv()
            assert [label(f) for f in await other.run()] == [
                "agent_stopped",
                "agent_completion",
                "response_complete",
            ]

    @pytest.mark.parametrize(
        ("argv", "problem"),
        [
            (
                [""],
                "loopwire: invalid_message: invalid chat message: content: "
                "String should have at least 1 character",
            ),
            (
                ["--strategy", "nope", "hi"],
                "loopwire: invalid_message: unknown loop_strategy 'nope'",
            ),
        ],
    )
    async def test_what_used_to_hang_ends_at_once(
        self, server: ServerProcess, tmp_path: Path, argv: list[str], problem: str
    ) -> None:
        """A chat the server refuses as invalid exits at once with one error
        line and no output, as bad arguments (the help's 2; it was 1)."""
        ran = await self.chat(server, tmp_path, *argv).run()
        assert (ran.status, ran.out) == (ExitCode.USAGE, [])
        assert len(ran.err) == 1 and ran.err[0].startswith(problem)

    @pytest.mark.parametrize("steps", ["0", "-3", "many"])
    async def test_a_bad_step_budget_is_a_usage_error(
        self, server: ServerProcess, tmp_path: Path, steps: str
    ) -> None:
        """`--max-steps` below 1 or not a number is refused before connecting
        (status 2, argparse's one line naming it)."""
        ran = await self.chat(server, tmp_path, f"--max-steps={steps}", "hi").run()
        assert (ran.status, ran.out) == (ExitCode.USAGE, [])
        assert "argument --max-steps" in ran.err[-1]

    async def test_piped_into_head_it_stops_quietly(
        self, server: ServerProcess, tmp_path: Path
    ) -> None:
        """Its reader gone (`| head -1`), it stops the run and exits 141 with
        nothing on stderr (it printed an ExceptionGroup's traceback)."""
        command = self.chat(server, tmp_path, "--agent", "convert 10 miles")
        reading, writing = os.pipe()
        process = await command.start(stdout=writing)
        os.close(writing)
        with os.fdopen(reading, "rb") as reader:
            first = await asyncio.to_thread(reader.readline)
        assert first == b"\xe2\x80\x94 step 1 / 10\n"  # then `head` closes it
        assert process.stdin is not None and process.stderr is not None
        process.stdin.write(b"km\n")
        async with asyncio.timeout(LIMIT_S):
            err = await process.stderr.read()
            status = await process.wait()
        assert (status, err) == (ExitCode.PIPE_CLOSED, b"")
        async with httpx.AsyncClient() as http:  # and its run was stopped
            url = f"http://127.0.0.1:{server.port}/api/conversations?limit=1"
            newest = (await http.get(url)).json()["items"][0]["id"]
        async with AsyncExitStack() as stack:
            other = await server.client(stack, f"session_id={newest}&last_seq=0")
            frames = await other.until_label("response_complete")
        assert [label(f) for f in frames][-3:] == [
            "agent_stopped",
            "agent_completion",
            "response_complete",
        ]

    async def test_on_a_terminal_the_answer_is_rendered_markdown(
        self, server: ServerProcess, tmp_path: Path
    ) -> None:
        """On a terminal the answer's markdown is rendered, with no raw `**`."""
        env = environment(server.port, TERM="xterm-256color", COLUMNS="100")
        command = Command(tmp_path, env, "chat", "--agent", "convert 10 miles to km")
        main, side = pty.openpty()
        with os.fdopen(main, "rb", buffering=0) as screen:
            process = await command.start(stdin=side, stdout=side, stderr=side)
            os.close(side)
            shown = await asyncio.to_thread(_read_all, screen)
            async with asyncio.timeout(LIMIT_S):
                assert await process.wait() == ExitCode.FINISHED
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode())
        assert "10 miles is 16.0934 km" in text
        assert "**" not in text

    async def test_edit_opens_the_arguments_in_editor(
        self, server: ServerProcess, tmp_path: Path
    ) -> None:
        """On a terminal, `e` opens the call's arguments in `$EDITOR`; the
        call runs with what the editor left in the file."""
        editor = tmp_path / "editor.py"
        editor.write_text(
            "import json, sys\n"
            "path = sys.argv[1]\n"
            "was = json.load(open(path))\n"
            "json.dump({'text': was['text'] + ' (edited)'}, open(path, 'w'))\n"
        )
        env = {
            **environment(server.port),
            "TERM": "dumb",
            "COLUMNS": "200",
            "EDITOR": f"{sys.executable} {editor}",
        }
        message = "remember that the gate code is 1234"
        command = Command(tmp_path, env, "chat", "--agent", message)
        main, side = pty.openpty()
        with os.fdopen(main, "r+b", buffering=0) as screen:
            process = await command.start(stdin=side, stdout=side, stderr=side)
            os.close(side)
            asked = await asyncio.to_thread(_read_until, screen, b"for [m]e ")
            screen.write(b"e\n")
            shown = asked + await asyncio.to_thread(_read_all, screen)
            async with asyncio.timeout(LIMIT_S):
                assert await process.wait() == ExitCode.FINISHED
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode())
        assert (
            '✓ save_note approved with {"text": "the gate code is 1234 (edited)"}'
            in text
        )
        saved = re.search(
            r'← save_note: \{"saved": \{"id": \d+, "text": "([^"]*)"', text
        )
        assert saved is not None and saved[1] == "the gate code is 1234 (edited)"


def _read_until(screen: Any, end: bytes) -> bytes:
    """What a terminal shows, up to and including `end`."""
    shown = b""
    while end not in shown:
        chunk = screen.read(4096)
        if not chunk:
            raise AssertionError(f"the terminal closed before {end!r}: {shown!r}")
        shown += chunk
    return shown


def _read_all(screen: Any) -> bytes:
    """Everything a terminal shows until the process closes it."""
    chunks = []
    while True:
        try:
            chunk = screen.read(4096)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


async def test_a_question_that_times_out(tmp_path: Path) -> None:
    """A question left unanswered past the server's timeout exits with that status."""
    async with server_process(
        "sqlite://", llm_provider="offline", request_input_timeout_s="0.5"
    ) as server:
        env = environment(server.port)
        command = Command(tmp_path, env, "chat", "--agent", "convert 10 miles")
        await command.start()  # stdin stays open: only the timeout ends the wait
        ran = await command.finish()
    assert ran.status == ExitCode.TIMEOUT
    assert "  (the question timed out)" in ran.out


async def test_nothing_listening_on_loopwire_port(tmp_path: Path) -> None:
    """With no server on `LOOPWIRE_PORT`, the command exits with one connect error."""
    port = free_port()
    ran = await Command(tmp_path, environment(port), "chat", "hi").run()
    assert ran.status == ExitCode.CONNECTION
    assert len(ran.err) == 1
    assert ran.err[0].startswith(
        f"loopwire: cannot connect to ws://127.0.0.1:{port}/ws"
    )


@pytest.mark.parametrize("argv", [["chat", "hi"], ["serve"], ["conversations"]])
async def test_a_bad_port_setting_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    """A non-integer `LOOPWIRE_PORT` makes every command exit with one usage line."""
    ran = await Command(tmp_path, environment("abc"), *argv).run()
    assert ran.status == ExitCode.USAGE
    assert ran.out == []
    assert ran.err == [
        "loopwire: invalid setting LOOPWIRE_PORT='abc': Input should be a valid "
        "integer, unable to parse string as an integer"
    ]


async def test_the_token_comes_from_loopwire_auth_token(tmp_path: Path) -> None:
    """`LOOPWIRE_AUTH_TOKEN` signs the chat in; a wrong one ends in a 401 line."""
    token = "a-long-enough-token-123"
    async with server_process(
        "sqlite://", llm_provider="offline", auth_token=token
    ) as server:
        signed_in = environment(server.port, auth_token=token)
        ran = await Command(tmp_path, signed_in, "chat", "what is 6*7").run()
        assert (ran.status, ran.err) == (ExitCode.FINISHED, [])
        assert "assistant: 6 \u00d7 7 = **42**" in ran.out

        wrong = environment(server.port, auth_token="wrong-token-000000000")
        ran = await Command(tmp_path, wrong, "chat", "what is 6*7").run()
    assert (ran.status, ran.out) == (ExitCode.CONNECTION, [])
    assert ran.err == [
        f"loopwire: ws://127.0.0.1:{server.port}/ws: refused (401 unauthorized): "
        "sign in first: the login page's cookie, or Authorization: Bearer <token>"
    ]
