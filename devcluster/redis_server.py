"""A throwaway Redis server, from Debian's `redis-server` package.

`RedisServer.start()` runs it in the foreground on 127.0.0.1 and a free port,
with no persistence, in a temporary directory, and returns once its log says
it accepts connections; `stop()` ends it and removes the directory. Under
root it runs as the `redis` system user the package creates.

For fault tests, `halt()` ends the server but keeps its port and directory,
and `start_again()` starts it there again, empty (`restart()`: both).
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import threading
from pathlib import Path

from devcluster.foreground import Foreground
from devcluster.ports import free_port

READY = "Ready to accept connections"


def find_redis() -> str | None:
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )


def unavailable_reason() -> str | None:
    """Why a server cannot be started here (None: it can)."""
    if find_redis() is None:
        return "Redis is not installed (`make test` installs it when run as root)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("redis")
        except KeyError:
            return "running as root and there is no `redis` user to run the server"
    return None


class RedisServer(Foreground):
    name = "redis-server"

    def __init__(self) -> None:
        super().__init__()
        self.port = 0
        self.url = ""
        self._dir: Path | None = None
        self._command: list[str] = []

    def start(self) -> RedisServer:
        reason = unavailable_reason()
        binary = find_redis()
        if reason is not None or binary is None:
            raise RuntimeError(reason or "Redis is not installed")
        self._dir = Path(tempfile.mkdtemp(prefix="loopwire-redis-"))
        command = [binary]
        if os.geteuid() == 0:
            user = pwd.getpwnam("redis")
            os.chown(self._dir, user.pw_uid, user.pw_gid)
            command = ["runuser", "-u", "redis", "--", binary]
        self.port = free_port()
        options = ["--port", str(self.port), "--bind", "127.0.0.1"]
        options += ["--dir", str(self._dir), "--save", "", "--appendonly", "no"]
        options += ["--daemonize", "no", "--logfile", ""]
        self._command = [*command, *options]
        self.spawn(self._command, READY, self._dir)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        return self

    # ------------------------------------------------------------ faults

    def halt(self) -> None:
        """End the server, keeping its port and directory for `start_again()`.
        Nothing persists: the data goes with it."""
        self.end_server()

    def start_again(self) -> RedisServer:
        """Start a `halt()`ed server again on the same port (empty)."""
        assert self._dir is not None and self._command, "not started"
        self._reader_done = threading.Event()  # the new process's reader's
        self.spawn(self._command, READY, self._dir)
        return self

    def restart(self) -> RedisServer:
        """`halt()`, then `start_again()`: the same port, no data."""
        self.halt()
        return self.start_again()

    def stop(self) -> None:
        super().stop()
        directory, self._dir = self._dir, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()
