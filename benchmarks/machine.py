"""`Machine`: what the figures were measured on."""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

PACKAGES = ("openai", "uvicorn", "websockets", "starlette", "uvloop", "httptools")


@dataclass(frozen=True)
class Machine:
    cpu: str
    cores: int
    python: str
    system: str
    packages: tuple[tuple[str, str], ...]

    @classmethod
    def this(cls) -> Machine:
        return cls(
            cpu=_cpu_model(),
            cores=len(os.sched_getaffinity(0)),
            python=platform.python_version(),
            system=f"{platform.system()} {platform.release()} {platform.machine()}",
            packages=tuple((name, _version(name)) for name in PACKAGES),
        )


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor() or "unknown"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def source_revision(root: Path) -> str:
    """The git commit measured, and whether the server's code had changes
    not committed (``abc1234`` or ``abc1234 + uncommitted changes``)."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "backend", "loopwire", "prompts")
    return f"{commit} + uncommitted changes" if dirty else commit
