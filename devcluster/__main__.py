"""`make cluster`: loopwire as several instances on one machine.

PostgreSQL and Redis from Debian's packages (each on 127.0.0.1, a free port
and a temporary directory, as its own system user when run as root), two or
three loopwire instances on their own ports sharing them, and nginx in front
(round-robin, no stickiness, WebSocket upgrades passed through). It prints
the URL and runs until Ctrl-C, then stops everything and removes the
temporary directories: a local demonstration of the topology
docs/scaling.md describes, not a deployment.

    python -m devcluster [--instances 3] [--port 8080]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from devcluster.foreground import Foreground
from devcluster.nginx_server import Balancer
from devcluster.ports import free_port
from devcluster.postgres_server import PostgresServer
from devcluster.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
STARTED = "Uvicorn running on"


class Instance(Foreground):
    name = "loopwire"

    def __init__(self, number: int, env: dict[str, str]) -> None:
        super().__init__()
        self.number = number
        self.echo = f"[{number}] "
        self.port = free_port()
        self.env = {**env, "LOOPWIRE_PORT": str(self.port)}

    def start(self) -> Instance:
        command = [sys.executable, "-m", "backend", "serve"]
        self.spawn(command, STARTED, ROOT, env=self.env)
        return self


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster")
    parser.add_argument("--instances", type=int, default=3, choices=(2, 3, 4))
    parser.add_argument("--port", type=int, default=8080, help="the balancer's port")
    options = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="loopwire-cluster-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        print("starting PostgreSQL and Redis…", flush=True)
        postgres = stack.enter_context(PostgresServer())
        redis = stack.enter_context(RedisServer())
        env = {
            **os.environ,
            "LOOPWIRE_DATABASE_URL": postgres.url,
            "LOOPWIRE_REDIS_URL": redis.url,
            "LOOPWIRE_HOST": "127.0.0.1",
            "LOOPWIRE_FILES_DIR": str(scratch / "files"),  # one folder, shared
            "LOOPWIRE_TRUSTED_PROXIES": "127.0.0.1",  # nginx names the client
            "PYTHONUNBUFFERED": "1",
        }
        if "LOOPWIRE_DATA_SOURCES" not in env:
            env["LOOPWIRE_DATA_SOURCES"] = f"demo={ROOT / 'demo' / 'documents'}"
        instances = []
        for number in range(1, options.instances + 1):
            # the documents' index is each instance's own cache
            index = str(scratch / f"sources-{number}.db")
            instance = Instance(number, {**env, "LOOPWIRE_SOURCES_INDEX": index})
            instances.append(stack.enter_context(instance.start()))
            print(f"instance {number} on 127.0.0.1:{instance.port}", flush=True)
        balancer = Balancer([i.port for i in instances], port=options.port)
        stack.enter_context(balancer)
        print(
            f"\nloopwire: {balancer.url}  ({options.instances} instances behind "
            f"nginx; PostgreSQL {postgres.url}; Redis {redis.url})\n"
            "Ctrl-C stops them all.",
            flush=True,
        )
        _until_stopped()
        print("\nstopping…", flush=True)
    return 0


def _until_stopped() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda _sig, _frame: stop.set())
    stop.wait()


if __name__ == "__main__":
    raise SystemExit(main())
