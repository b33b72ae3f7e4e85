"""`Service`: a server the bench starts as a subprocess, and always stops.

Each runs in its own process group (`start_new_session`), its output in a
log file in the bench's work directory, on a free loopback port. It is
ready when its health URL answers 200 with the JSON that proves it is the
process we started (a bounded poll at a short interval; an early exit
fails at once with the end of its log). `stop` sends SIGTERM to the group
(loopwire drains), waits, then SIGKILL: nothing is left running, and only
what the bench started is signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.checks import BenchError
from benchmarks.probe import ProbeError, get_json

ROOT = Path(__file__).resolve().parent.parent
START_LIMIT_S = 90.0
STOP_LIMIT_S = 20.0

Check = Callable[[Any], bool]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_environment(**extra: str) -> dict[str, str]:
    """This environment without loopwire's or OpenAI's settings, plus `extra`;
    the bench's own modules importable from anywhere."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LOOPWIRE_", "OPENAI_"))
    }
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class Service:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    _stopped: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise BenchError(
                f"{self.name} exited with status {code}:\n{self.log_tail()}"
            )

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL if it lingers, then SIGKILL
        to whatever of the group is left (once; safe to call again)."""
        if self._stopped:
            return
        self._stopped = True
        if self.process.returncode is None:
            self._signal(signal.SIGTERM)
            if not self._exited(STOP_LIMIT_S):
                self._signal(signal.SIGKILL)
                self._exited(STOP_LIMIT_S)
        # The leader is a zombie until reaped, so its group id is still ours.
        self._signal(signal.SIGKILL)
        self.process.wait(STOP_LIMIT_S)

    def _exited(self, limit_s: float) -> bool:
        """Wait (bounded) until the leader exits, without reaping it."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            try:
                flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
                if os.waitid(os.P_PID, self.process.pid, flags) is not None:
                    return True
            except ChildProcessError:
                return True  # reaped already
            time.sleep(0.02)
        return False

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)


def launch(
    name: str,
    argv: Sequence[str],
    *,
    port: int,
    env: Mapping[str, str],
    workdir: Path,
) -> Service:
    """Start `argv` (a Python module: `sys.executable` is prepended)."""
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, *argv],
            cwd=workdir,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    print(f"bench: started {name} pid {process.pid} port {port}", file=sys.stderr)
    return Service(name, process, port, log_path)


async def ready(service: Service, path: str, check: Check) -> Service:
    """Poll `path` until it answers what `check` accepts (bounded)."""
    deadline = time.monotonic() + START_LIMIT_S
    problem = "no answer"
    while time.monotonic() < deadline:
        service.check_alive()
        try:
            answer = await get_json(service.port, path, timeout_s=2.0)
        except ProbeError as exc:
            problem = str(exc)
        else:
            if check(answer):
                return service
            service.stop()
            raise BenchError(
                f"{service.name}: port {service.port} answers {answer!r}: "
                "another process holds it"
            )
        await asyncio.sleep(0.05)
    service.stop()
    raise BenchError(
        f"{service.name} not ready in {START_LIMIT_S:g}s ({problem}):\n"
        f"{service.log_tail()}"
    )
