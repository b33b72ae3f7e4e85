"""A throwaway PostgreSQL server for the tests, from Debian's packages.

`PostgresServer` runs `initdb` into a temporary directory and starts the
server with `pg_ctl -w` (which waits until it accepts connections) on
127.0.0.1 and a free port, trusting local connections; `stop()` stops it and
removes the directory. PostgreSQL refuses to run as root, so under root it
runs as the `postgres` system user the Debian package creates.

For fault tests, `halt()` stops the server but keeps its data directory and
port, and `start_again()` brings the same server back (`restart()`: both).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Literal

USER = "loopwire"
DATABASE = "loopwire"
ShutdownMode = Literal["smart", "fast", "immediate"]
"""pg_ctl's stop modes (`halt()`)."""


def find_pg_bin() -> Path | None:
    """The newest `/usr/lib/postgresql/*/bin` with initdb and pg_ctl."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
    )
    for directory in reversed(candidates):
        path = Path(directory)
        if (path / "initdb").exists() and (path / "pg_ctl").exists():
            return path
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def unavailable_reason() -> str | None:
    """Why a server cannot be started here (None: it can)."""
    if find_pg_bin() is None:
        return "PostgreSQL is not installed (`make test` installs it when run as root)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run the server"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    def __init__(self) -> None:
        self.port = 0
        self.url = ""
        self._dir: Path | None = None
        self._bin = find_pg_bin()

    # ------------------------------------------------------------ commands

    def _as_server_user(self, *command: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *command]
        return list(command)

    def _run(self, *command: str) -> None:
        result = subprocess.run(
            self._as_server_user(*command),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=self._dir,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{Path(command[0]).name} failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()}\n{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        log = self._dir / "server.log" if self._dir else None
        if log is None or not log.exists():
            return ""
        lines = log.read_text(errors="replace").splitlines()
        return "server log:\n" + "\n".join(lines[-20:])

    @property
    def pid(self) -> int:
        """The postmaster's pid (its backends are its children)."""
        assert self._dir is not None, "the server is not started"
        return int((self._dir / "data" / "postmaster.pid").read_text().split()[0])

    # ------------------------------------------------------------ lifecycle

    def start(self) -> PostgresServer:
        reason = unavailable_reason()
        if reason is not None or self._bin is None:
            raise RuntimeError(reason or "PostgreSQL is not installed")
        self._dir = Path(tempfile.mkdtemp(prefix="loopwire-pg-"))
        if os.geteuid() == 0:
            server_user = pwd.getpwnam("postgres")
            os.chown(self._dir, server_user.pw_uid, server_user.pw_gid)
        self.port = _free_port()
        data = self._dir / "data"
        try:
            self._run(
                str(self._bin / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                USER,
                "--encoding=UTF8",
                "--no-sync",
            )
            self._pg_ctl_start()
            self._run(
                str(self._bin / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                USER,
                DATABASE,
            )
        except BaseException:
            self.stop()
            raise
        self.url = f"postgresql+asyncpg://{USER}@127.0.0.1:{self.port}/{DATABASE}"
        return self

    def _pg_ctl_start(self) -> None:
        """`pg_ctl start -w` on the data directory, port and options of `start()`."""
        assert self._bin is not None and self._dir is not None
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self._dir} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            str(self._bin / "pg_ctl"),
            "-D",
            str(self._dir / "data"),
            "-o",
            options,
            "-l",
            str(self._dir / "server.log"),
            "-w",
            "-t",
            "30",
            "start",
        )

    # ------------------------------------------------------------ faults

    def halt(self, mode: ShutdownMode = "fast") -> None:
        """Stop the server, keeping its data directory and port (for
        `start_again()`). `mode` is pg_ctl's: `fast` rolls back open
        transactions and cuts every client; `immediate` is a crash (the
        next start recovers from the WAL)."""
        assert self._bin is not None and self._dir is not None, "not started"
        self._run(
            str(self._bin / "pg_ctl"),
            "-D",
            str(self._dir / "data"),
            "-m",
            mode,
            "-w",
            "-t",
            "30",
            "stop",
        )

    def start_again(self) -> PostgresServer:
        """Start a `halt()`ed server again: the same port, URL and data."""
        assert self._dir is not None, "not started"
        self._pg_ctl_start()
        return self

    def restart(self, mode: ShutdownMode = "fast") -> PostgresServer:
        """`halt(mode)`, then `start_again()`."""
        self.halt(mode)
        return self.start_again()

    def stop(self) -> None:
        directory, self._dir = self._dir, None
        if directory is None:
            return
        data = directory / "data"
        if self._bin is not None and (data / "postmaster.pid").exists():
            subprocess.run(
                self._as_server_user(
                    str(self._bin / "pg_ctl"),
                    "-D",
                    str(data),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ),
                capture_output=True,
                timeout=60,
                check=False,
                cwd=directory,
            )
        shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
