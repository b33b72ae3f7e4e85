"""Where the server's CPU goes: a sampling profile of one measured round.

`Profiler.sampling` runs py-spy (`py-spy record --pid P --rate 200 --format
raw --threads --nolineno --full-filenames --nonblocking`: collapsed stacks,
the process not paused to take them) on the loopwire server for the length
of one round, the first, of the act-shaped turns and of the agent runs at
the highest concurrency. py-spy leaves out the samples of idle threads (its
default, kept): the profile is of the CPU the server's threads spent, the
event loop's thread and the store's alike.

Each sample goes into one bucket (`classify`). The frames from the
thread's start to the event loop's run (start-up's `main`, uvicorn's
`Server.run`, `Runner.run`; with the pure-Python loop, down to `_run_once`
and `Handle._run`) say nothing of the work and are left out. Of the
others, the innermost frame that one of `RULES` names decides: a library's
own frames count as that library's bucket (JSON encoding that the LLM
client does counts as JSON; SQLAlchemy under the store as the store), and
frames of the standard library or of other libraries count as their
caller's (pydantic too, except serialising: JSON). A sample with no frame
below the loop's run (uvloop's own C code: its socket reads and writes, its
callbacks' bookkeeping) or only asyncio's is the event loop's I/O; one on a
thread named for SQLite with no frame a rule names (SQLite's C code called
from the executor's `_worker`) is the store's; anything else is "other".

py-spy missing (the `bench` extra installs it), not allowed to attach
(ptrace), or failing: the bench runs on, and the report says why it has no
profile.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.processes import ROOT
from benchmarks.results import Profile

RATE = 200
"""Samples per second."""
ATTACH_LIMIT_S = 15.0
STOP_LIMIT_S = 30.0
LLM = "the LLM client"
STORE = "the store"
SOCKET = "the WebSocket path"
JSON = "JSON encoding and decoding"
OWN = "loopwire's own code"
LOOP = "event loop / I/O"
OTHER = "other"
BUCKETS = (LLM, STORE, SOCKET, JSON, OWN, LOOP, OTHER)
"""Every bucket, in the order the report lists them."""
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        LLM,
        (
            "openai/",
            "httpx/",
            "httpx2/",
            "httpcore/",
            "aiohttp/",
            "aiohappyeyeballs/",
            "yarl/",
            "multidict/",
            "backend/llm/openai_compat/",
        ),
    ),
    (STORE, ("sqlalchemy/", "aiosqlite/", "asyncpg/", "sqlite3/", "backend/store/")),
    (
        SOCKET,
        (
            "uvicorn/",
            "websockets/",
            "starlette/",
            "h11/",
            "httptools/",
            "backend/transport/",
        ),
    ),
    (JSON, ("json/", "orjson/")),
    (OWN, ("backend/",)),
)
"""Each bucket and the files (from site-packages, the standard library or the
project's root) whose frames are its own; the first that names a frame wins."""
PYDANTIC = ("pydantic/", "pydantic_core/")
SERIALISING = re.compile(r"dump|serializ|json", re.IGNORECASE)
"""pydantic's frames count as JSON when serialising (`model_dump_json`,
`TypeAdapter.validate_json`, …); validating a model is its caller's."""
STORE_THREADS = ("sqlite",)
"""A thread whose name has one of these is the store's: its samples with no
frame a bucket names (SQLite's own C code, called from the executor's
`_worker`) count as the store."""
LOOP_RUNS = frozenset(
    {
        "Runner.run",
        "BaseEventLoop.run_forever",
        "BaseEventLoop._run_once",
        "Handle._run",
    }
)
LOOP_FILES = ("asyncio/", "selectors.py", "uvloop/")
FRAME = re.compile(r"^(?P<function>.*) \((?P<path>.*?)(?::\d+)?\)$")


@dataclass(frozen=True)
class Frame:
    function: str
    module: str
    """The file from the project's root, site-packages or the standard
    library: `backend/store/engine.py`, `openai/_client.py`, `json/encoder.py`."""

    @classmethod
    def parse(cls, text: str) -> Frame:
        match = FRAME.match(text)
        if match is None:
            return cls(text, "")
        return cls(match["function"], module_of(match["path"]))

    @property
    def label(self) -> str:
        return f"`{self.function}` ({self.module})"


def module_of(path: str) -> str:
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    if path.startswith(f"{ROOT}/"):
        return path[len(str(ROOT)) + 1 :]
    stdlib = re.search(r"/lib/python3\.\d+/(.*)$", path)
    return stdlib[1] if stdlib else path


def _bucket_of(frame: Frame) -> str | None:
    if frame.module.startswith(PYDANTIC):
        return JSON if SERIALISING.search(frame.function) else None
    for bucket, modules in RULES:
        if frame.module.startswith(modules):
            return bucket
    return None


def _below_loop(frames: Sequence[Frame]) -> Sequence[Frame]:
    """The frames inside the event loop's innermost run (all of them on a
    thread without a loop)."""
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        if frame.function in LOOP_RUNS and frame.module.startswith("asyncio/"):
            return frames[index + 1 :]
    return frames


def classify(frames: Sequence[Frame], thread: str = "") -> tuple[str, Frame | None]:
    """One sample's bucket (`frames` outermost first, on `thread`) and, for
    loopwire's own code, its innermost frame of loopwire's."""
    inner = _below_loop(frames)
    for frame in reversed(inner):
        bucket = _bucket_of(frame)
        if bucket is not None:
            return bucket, frame if bucket == OWN else None
    if any(name in thread.lower() for name in STORE_THREADS):
        return STORE, None
    if all(frame.module.startswith(LOOP_FILES) for frame in inner):
        return LOOP, None
    return OTHER, None


def parse_line(line: str) -> tuple[str, list[Frame], int]:
    """A line of py-spy's raw output: its thread, its frames (outermost
    first) and how many samples had them."""
    stack, _, number = line.rstrip("\n").rpartition(" ")
    parts = stack.split(";")
    thread = parts.pop(0) if parts and parts[0].startswith("thread (") else ""
    return thread, [Frame.parse(part) for part in parts], int(number)


def summarise(what: str, raw: str, errors: int = 0) -> Profile:
    """The profile of py-spy's raw output: each bucket's share of the samples,
    and the functions of loopwire's own code with the most."""
    buckets: Counter[str] = Counter()
    own: Counter[str] = Counter()
    main_thread = 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        thread, frames, number = parse_line(line)
        bucket, deciding = classify(frames, thread)
        buckets[bucket] += number
        if deciding is not None:
            own[deciding.label] += number
        if thread.endswith(": MainThread"):
            main_thread += number
    total = sum(buckets.values())

    def share(value: int) -> float:
        return value / total if total else 0.0

    return Profile(
        what=what,
        rate=RATE,
        samples=total,
        errors=errors,
        buckets=tuple((name, share(value)) for name, value in buckets.most_common()),
        own_top=tuple((name, share(value)) for name, value in own.most_common(3)),
        main_thread=share(main_thread),
    )


def _text(log: Path) -> str:
    """py-spy's output so far (a few lines)."""
    return log.read_text(errors="replace")


def find_py_spy() -> str | None:
    """py-spy beside this Python (a virtual environment's bin), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profiler:
    """Samples a server for one round at a time; keeps each profile by key,
    or why there is none (`note`)."""

    def __init__(self, workdir: Path, *, enabled: bool = True) -> None:
        self.workdir = workdir
        self.program = find_py_spy() if enabled else None
        self.profiles: dict[str, Profile] = {}
        self.note = ""
        if not enabled:
            self.note = "not asked for (`--no-profile`)"
        elif self.program is None:
            self.note = (
                "py-spy is not installed (the `bench` extra: "
                "`pip install -e '.[bench]'`)"
            )

    @contextlib.asynccontextmanager
    async def sampling(
        self, key: str, what: str, pid: int, *, when: bool = True
    ) -> AsyncIterator[None]:
        """Sample `pid` while the block runs (if `when`, and py-spy works),
        then keep its profile as `key`."""
        if not when or self.program is None:
            yield
            return
        stacks = self.workdir / f"profile-{key}.stacks"
        log = self.workdir / f"profile-{key}.log"
        with log.open("wb") as output:
            process = await asyncio.create_subprocess_exec(
                *self._argv(pid, stacks),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            attached = await self._attached(process, log)
            yield
            if attached:
                await self._stop(process, log)
                self._keep(key, what, stacks, log)
        finally:
            if process.returncode is None:
                process.kill()

    def _argv(self, pid: int, stacks: Path) -> list[str]:
        assert self.program is not None
        return [
            self.program,
            "record",
            *("--pid", str(pid), "--rate", str(RATE), "--format", "raw"),
            *("--threads", "--nolineno", "--full-filenames", "--nonblocking"),
            *("--output", str(stacks)),
        ]

    async def _attached(self, process: asyncio.subprocess.Process, log: Path) -> bool:
        """Wait (a bounded poll) until py-spy says it samples, or has quit."""
        deadline = time.monotonic() + ATTACH_LIMIT_S
        while time.monotonic() < deadline:
            if "Sampling process" in _text(log):
                return True
            if process.returncode is not None:
                break
            await asyncio.sleep(0.02)
        self._fail("py-spy could not sample the server", log)
        return False

    async def _stop(self, process: asyncio.subprocess.Process, log: Path) -> None:
        """Ctrl-C, as py-spy expects: it writes its output, then exits."""
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), STOP_LIMIT_S)
        if process.returncode != 0:
            self._fail(f"py-spy ended with status {process.returncode}", log)

    def _keep(self, key: str, what: str, stacks: Path, log: Path) -> None:
        if self.program is None or not stacks.exists():
            return
        counted = re.search(r"Errors: (\d+)", _text(log))
        errors = int(counted[1]) if counted else 0
        self.profiles[key] = summarise(what, stacks.read_text(), errors)

    def _fail(self, why: str, log: Path) -> None:
        """No more profiles in this run: the first failure is the report's."""
        lines = [line.strip() for line in _text(log).splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("Error:")]
        said = (errors or lines[-1:] or ["no output"])[0].removeprefix("py-spy> ")
        if not self.note:
            self.note = f"{why}: {said}"
        self.program = None
