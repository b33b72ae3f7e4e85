"""`Foreground`: a server process run in the foreground, ready when its own
output says so (no polling of its port), stopped with SIGTERM. Run as its
service's user under root, `runuser` is the process started and the server
its child (`server_pid`, `end_server`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

START_LIMIT_S = 30.0
STOP_LIMIT_S = 30.0
KEPT_LINES = 500


class Foreground:
    name = "server"
    echo: str | None = None
    """Print each line of output with this prefix (None: keep quiet)."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=KEPT_LINES)
        self._process: subprocess.Popen[str] | None = None
        self._reader_done = threading.Event()
        self._under_runuser = False

    @property
    def pid(self) -> int:
        assert self._process is not None, f"{self.name} is not started"
        return self._process.pid

    def spawn(
        self,
        command: Sequence[str],
        ready: str,
        cwd: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Run `command`; return once a line of its output contains `ready`."""
        if self._process is not None:
            raise RuntimeError(f"{self.name} is started already")
        self._under_runuser = list(command)[:1] == ["runuser"]
        self._process = subprocess.Popen(
            list(command),
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=cwd,
        )
        started = threading.Event()
        reader = threading.Thread(target=self._read, args=(ready, started), daemon=True)
        reader.start()
        if not started.wait(START_LIMIT_S) or self._process.poll() is not None:
            self.stop()
            raise RuntimeError(
                f"{self.name} did not start:\n" + "\n".join(list(self.lines)[-30:])
            )

    def _read(self, ready: str, started: threading.Event) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self.lines.append(line.rstrip())
            if self.echo is not None:
                print(f"{self.echo}{line.rstrip()}", flush=True)
            if ready in line:
                started.set()
        started.set()  # it exited: `spawn` sees that
        self._reader_done.set()

    @property
    def server_pid(self) -> int:
        """The server's own pid: under `runuser`, its child."""
        pid = self.pid
        if not self._under_runuser:
            return pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return int(children[0]) if children else pid

    def end_server(self) -> None:
        """SIGTERM to the server itself (`runuser` would pass it on only after
        2 s; it follows its child out), then the process reaped; what a
        subclass's `stop` does besides is left to it."""
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                os.kill(self.server_pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=STOP_LIMIT_S)
        self._end()

    def stop(self) -> None:
        """SIGTERM (SIGKILL if that does not end it), then the pipe closed."""
        self._end()

    def _end(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_LIMIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            self._reader_done.wait(STOP_LIMIT_S)
            process.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
