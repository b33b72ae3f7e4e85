"""`Harness`: the processes a bench run needs, and the sizes it runs at.

Three kinds of server, each its own process so each one's CPU and memory
are its own:

- the fake LLM (`benchmarks/fake_llm.py`), one for the whole run;
- the bare echo (`benchmarks/echo.py`), one for the whole run;
- loopwire, started as `make run` starts it (`python -m backend serve`),
  pointed at the fake LLM, with a fresh SQLite database in the work
  directory and the per-socket limits raised so the bench is not throttled;
  a measurement may add settings of its own (`TOKEN_BATCHING_OFF`), named
  in the server's label. A fresh one per measurement (so no measurement
  inherits another's sessions or memory high-water mark), except with
  `--tiny`, where one is shared per kind of server and extra settings. The
  Stop measurement uses `python -m benchmarks.serve`, the same server plus
  the `bench_wait` tool. The idle-memory measurement starts its own, always
  fresh, with the product's default settings (no limits raised), only
  pointed at the fake LLM and its database (`default_loopwire`).

It also holds the run's `Profiler` (`benchmarks/profile.py`), which the
measurements that are profiled use for one of their rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.probe import get_json
from benchmarks.processes import Service, clean_environment, free_port, launch, ready
from benchmarks.profile import Profiler
from benchmarks.signals import Signals

if TYPE_CHECKING:
    from benchmarks.meter import Reading

LIMITS_RAISED = {
    "LOOPWIRE_WS_MESSAGES_PER_S": "1000000",
    "LOOPWIRE_WS_MESSAGE_BURST": "1000000",
    "LOOPWIRE_USER_MESSAGES_PER_S": "1000000",
    "LOOPWIRE_USER_MESSAGE_BURST": "1000000",
    "LOOPWIRE_MAX_SESSIONS": "100000",
    "LOOPWIRE_MAX_SESSIONS_PER_USER": "100000",
    "LOOPWIRE_MAX_CONNECTIONS": "100000",
    "LOOPWIRE_PARK_WAITING_AFTER_S": "3600",
    "LOOPWIRE_REQUEST_INPUT_TIMEOUT_S": "3600",
    "LOOPWIRE_TOOL_RATE_LIMIT_CALLS": "1000000",
    "LOOPWIRE_RUN_TIMEOUT_S": "3600",
}
"""Settings raised for the bench (backend/settings.py); all else is default."""
TOKEN_BATCHING_OFF = {"LOOPWIRE_TOKEN_BATCH_MS": "0"}
"""Extra settings for a loopwire sending a `token_stream` frame per piece the
model streams (by default they are joined, at most a frame per tick)."""
ROUND_LIMIT_S = 240.0
"""No measured round may take longer (a hang fails the bench)."""
BUSY_MACHINE = 0.10
"""Other processes' share of the CPU past which a round is called distorted."""
TICK_NOISE_S = 0.08
"""What clock-tick rounding of eight CPU readings can add up to (10 ms ticks)."""
MIN_ROUNDS = 2
"""Rounds every measurement makes, whatever the time budget."""
RESERVE_S = {
    "turns": 30.0,
    "tracing": 45.0,
    "runs": 90.0,
    "frames": 20.0,
    "pace": 20.0,
    "memory": 50.0,
    "idle": 40.0,
    "stop": 20.0,
}
"""Time kept in the budget for each measurement still to come (about what
each takes on 2 cores, server start included)."""


@dataclass(frozen=True)
class Sizes:
    rounds: int = 3
    turn_sessions: int = 100
    turns_per_session: int = 3
    answer_tokens: int = 16
    run_sessions: tuple[int, ...] = (10, 100, 1000)
    target_sessions: tuple[int, int] = (100, 1000)
    """The concurrencies the agent-run targets are judged at."""
    run_steps: int = 3
    llm_latency_ms: float = 200.0
    frame_sessions: int = 100
    frame_tokens: int = 200
    token_delay_ms: float = 5.0
    """The wait between two streamed tokens at a model's pace (`token_pace`)."""
    memory_sessions: int = 300
    """Sessions per batch; one RSS sample per batch."""
    memory_warmup: int = 50
    idle_starts: int = 3
    """Fresh servers started twice each (new database, then migrated) for
    their idle RSS; one sample per start."""
    stop_samples: int = 100
    """Stops per phase."""
    loop_runs: int = 30
    loop_steps: int = 10
    source_documents: int = 1000
    source_queries: int = 200
    fresh_servers: bool = True
    tiny: bool = False
    budget_s: float = 300.0
    """Rounds past the second are skipped when they would overrun this."""

    @classmethod
    def tiny_run(cls) -> Sizes:
        """A few sessions, one round: seconds, to check the harness works."""
        return cls(
            rounds=1,
            turn_sessions=3,
            turns_per_session=1,
            answer_tokens=4,
            run_sessions=(2, 4),
            target_sessions=(2, 4),
            run_steps=3,
            llm_latency_ms=20.0,
            frame_sessions=3,
            frame_tokens=10,
            token_delay_ms=2.0,
            memory_sessions=5,
            memory_warmup=2,
            idle_starts=1,
            stop_samples=2,
            loop_runs=2,
            loop_steps=2,
            source_documents=50,
            source_queries=20,
            fresh_servers=False,
            tiny=True,
            budget_s=600.0,
        )

    def with_changes(self, **changes: Any) -> Sizes:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclass
class Loopwire:
    service: Service

    @property
    def pid(self) -> int:
        return self.service.pid

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.service.port}/ws"


SharedKey = tuple[bool, tuple[tuple[str, str], ...]]
"""A shared loopwire's kind: the wait tool or not, and its extra settings."""


def labelled(label: str, env: Mapping[str, str]) -> str:
    """`label` naming the extra settings: `frames` with
    `LOOPWIRE_TOKEN_BATCH_MS=0` is `frames-token-batch-ms-0`."""
    parts = [label]
    for key, value in sorted(env.items()):
        name = key.removeprefix("LOOPWIRE_").lower().replace("_", "-")
        parts.append(f"{name}-{re.sub(r'[^A-Za-z0-9.]+', '_', value)}")
    return "-".join(parts)


def _is_healthy(answer: Any) -> bool:
    return isinstance(answer, dict) and answer.get("status") == "ok"


def _is_echo(answer: Any) -> bool:
    return isinstance(answer, dict) and answer.get("server") == "echo"


_STARTED = time.monotonic()


def progress(text: str) -> None:
    """One line of progress on stderr, with the seconds since the start."""
    print(
        f"bench {time.monotonic() - _STARTED:4.0f}s: {text}",
        file=sys.stderr,
        flush=True,
    )


class Harness:
    def __init__(self, sizes: Sizes, workdir: Path, *, profile: bool = True) -> None:
        self.sizes = sizes
        self.workdir = workdir
        self.profiler = Profiler(workdir, enabled=profile)
        self.signals = Signals()
        self.services: list[Service] = []
        self._shared: dict[SharedKey, Loopwire] = {}
        self._fake: Service | None = None
        self._echo: Service | None = None
        self._model = f"bench-{uuid.uuid4().hex[:8]}"
        self._count = 0
        self.deadline = time.monotonic() + sizes.budget_s
        self.cores = len(os.sched_getaffinity(0))
        self.other_load: list[float] = []
        """Per measured round: the share of the machine's CPU other
        processes took (`note_other_load`)."""
        self.still_to_come: tuple[str, ...] = ()
        """The measurements after the one running (room is kept for them)."""

    def note_other_load(self, reading: Reading) -> None:
        """Record the share of the machine's CPU other processes took in a
        round (warned about past `BUSY_MACHINE`)."""
        ours = reading.server_cpu_s + reading.fake_cpu_s + reading.client_cpu_s
        other = reading.machine_cpu_s - ours - TICK_NOISE_S
        capacity = reading.window_s * self.cores
        share = max(0.0, other) / capacity if capacity else 0.0
        self.other_load.append(share)
        if share > BUSY_MACHINE:
            progress(
                f"warning: other processes took {share:.0%} of the machine's CPU "
                "during that round: its figures are distorted"
            )

    def rounds(self, what: str) -> Iterator[int]:
        """Round numbers 1, 2, … `sizes.rounds`. One past the second comes
        only if the budget has room for it (as long as the last one) and for
        the measurements still to come."""
        started = time.monotonic()
        for number in range(1, self.sizes.rounds + 1):
            last_s = time.monotonic() - started
            reserve = sum(RESERVE_S.get(name, 20.0) for name in self.still_to_come)
            room = self.deadline - time.monotonic() - reserve
            if number > MIN_ROUNDS and last_s > room:
                progress(
                    f"{what}: {number - 1} rounds: the time budget has no room for more"
                )
                return
            started = time.monotonic()
            yield number

    @property
    def fake(self) -> Service:
        assert self._fake is not None, "the harness is not started"
        return self._fake

    @property
    def echo(self) -> Service:
        assert self._echo is not None, "the harness is not started"
        return self._echo

    @property
    def echo_url(self) -> str:
        return f"ws://127.0.0.1:{self.echo.port}/ws"

    async def start(self) -> None:
        """The fake LLM and the echo; with `--tiny`, the shared loopwires too."""
        await self.signals.open()
        fake_port, echo_port = free_port(), free_port()
        self._fake = self._launch(
            "fake-llm",
            [
                "-m",
                "benchmarks.fake_llm",
                "--port",
                str(fake_port),
                "--model",
                self._model,
                "--signal-port",
                str(self.signals.port),
            ],
            fake_port,
        )
        self._echo = self._launch(
            "echo", ["-m", "benchmarks.echo", "--port", str(echo_port)], echo_port
        )
        waits: list[Awaitable[object]] = [
            ready(self._fake, "/v1/models", self._is_fake),
            ready(self._echo, "/healthz", _is_echo),
        ]
        if not self.sizes.fresh_servers:
            waits += [self._shared_loopwire(False, {}), self._shared_loopwire(True, {})]
        await asyncio.gather(*waits)
        progress(f"fake LLM pid {self.fake.pid}, echo pid {self.echo.pid} ready")

    def close(self) -> None:
        """Stop every process the harness started (safe to call twice)."""
        for service in reversed(self.services):
            service.stop()
        self.signals.close()

    async def counts(self) -> dict[str, int]:
        """The fake LLM's requests so far, by phase."""
        answer = await get_json(self.fake.port, "/_bench/counts")
        return {str(k): int(v) for k, v in answer.items()}

    @contextlib.asynccontextmanager
    async def loopwire(
        self,
        label: str,
        *,
        wait_tool: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Loopwire]:
        """A loopwire server for one measurement (fresh unless `--tiny`), with
        the extra settings `env` (`LOOPWIRE_*`; with `--tiny`, shared only by
        the measurements asking for the same)."""
        extra = dict(env or {})
        if not self.sizes.fresh_servers:
            yield await self._shared_loopwire(wait_tool, extra)
            return
        server = await self._start_loopwire(labelled(label, extra), wait_tool, extra)
        try:
            yield server
        finally:
            server.service.stop()
            self.services.remove(server.service)

    @contextlib.asynccontextmanager
    async def fresh_echo(self, label: str) -> AsyncIterator[Service]:
        """An echo of its own (for memory figures), unless `--tiny`."""
        if not self.sizes.fresh_servers:
            yield self.echo
            return
        self._count += 1
        port = free_port()
        argv = ["-m", "benchmarks.echo", "--port", str(port)]
        service = self._launch(f"{label}-{self._count}", argv, port)
        try:
            await ready(service, "/healthz", _is_echo)
            yield service
        finally:
            service.stop()
            self.services.remove(service)

    async def _shared_loopwire(
        self, wait_tool: bool, env: Mapping[str, str]
    ) -> Loopwire:
        """The `--tiny` run's loopwire of this kind, started at first use (the
        two without extra settings by `start`)."""
        key: SharedKey = (wait_tool, tuple(sorted(env.items())))
        if key not in self._shared:
            label = labelled("loopwire-wait-tool" if wait_tool else "loopwire", env)
            self._shared[key] = await self._start_loopwire(label, wait_tool, env)
        return self._shared[key]

    @contextlib.asynccontextmanager
    async def default_loopwire(
        self, label: str, database_url: str
    ) -> AsyncIterator[Loopwire]:
        """A fresh loopwire (even with `--tiny`) with the product's default
        settings, only pointed at the fake LLM and at `database_url`: no
        limit raised. Stopped when the block ends."""
        server = await self._start_loopwire(
            label, False, {}, database_url, limits=False
        )
        try:
            yield server
        finally:
            server.service.stop()
            self.services.remove(server.service)

    async def instance(
        self, label: str, database_url: str, env: Mapping[str, str]
    ) -> Loopwire:
        """A loopwire on `database_url` (one of several on it: the cluster
        bench); the caller stops it (`service.stop()`)."""
        return await self._start_loopwire(label, False, env, database_url)

    async def _start_loopwire(
        self,
        label: str,
        wait_tool: bool,
        extra: Mapping[str, str],
        database_url: str | None = None,
        *,
        limits: bool = True,
    ) -> Loopwire:
        """A loopwire on a free port, with the bench's settings (`limits`:
        `LIMITS_RAISED` too), then `extra` (which cannot move it off its
        port, database or the fake LLM)."""
        self._count += 1
        port = free_port()
        name = f"{label}-{self._count}" if self.sizes.fresh_servers else label
        database = database_url or f"sqlite:///{self.workdir / f'{name}.db'}"
        own = {
            "LOOPWIRE_HOST": "127.0.0.1",
            "LOOPWIRE_PORT": str(port),
            "LOOPWIRE_LLM_BASE_URL": f"http://127.0.0.1:{self.fake.port}/v1",
            "LOOPWIRE_LLM_API_KEY": "x",
            "LOOPWIRE_LLM_MODEL": self._model,
            "LOOPWIRE_DATABASE_URL": database,
        }
        env = {**(LIMITS_RAISED if limits else {}), **extra, **own}
        if wait_tool:
            argv = ["-m", "benchmarks.serve", "--signal-port", str(self.signals.port)]
        else:
            argv = ["-m", "backend", "serve"]
        service = self._launch(name, argv, port, env)
        await ready(service, "/healthz", _is_healthy)
        await ready(service, "/api/info", lambda a: a.get("model") == self._model)
        return Loopwire(service)

    def _launch(
        self, name: str, argv: list[str], port: int, env: dict[str, str] | None = None
    ) -> Service:
        service = launch(
            name,
            argv,
            port=port,
            env=clean_environment(**(env or {})),
            workdir=self.workdir,
        )
        self.services.append(service)
        return service

    def _is_fake(self, answer: Any) -> bool:
        data = answer.get("data") if isinstance(answer, dict) else None
        return (
            isinstance(data, list) and bool(data) and data[0].get("id") == self._model
        )
