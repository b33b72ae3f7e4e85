"""CPU time and memory of processes, read from `/proc` (Linux).

CPU is `utime + stime` from `/proc/<pid>/stat` in clock ticks
(`SC_CLK_TCK`, usually 10 ms), summed over the process and every live
descendant (tool worker processes), plus the children it has already
reaped. Memory is `VmRSS` from `/proc/<pid>/status`. The bench reads them
just before and just after each measured round; `settle` first waits until
the process has gone quiet, so work a round leaves behind (writes to the
store) is counted in that round and not the next.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name, from field 3 on."""
    text = (PROC / str(pid) / "stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def _parents() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int(_stat_fields(int(entry.name))[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`."""
    children = _parents()
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def cpu_seconds(pid: int) -> float:
    """CPU time used so far by `pid` and its descendants, in seconds."""
    fields = _stat_fields(pid)
    ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    for child in descendants(pid):
        try:
            child_fields = _stat_fields(child)
        except OSError:
            continue
        ticks += int(child_fields[11]) + int(child_fields[12])
    return ticks / CLOCK_TICKS


def own_cpu_seconds() -> float:
    """CPU time of this (the bench's) process so far, in seconds."""
    times = os.times()
    return times.user + times.system


def machine_busy_seconds() -> float:
    """CPU time all processes of the machine used so far (every core), in
    seconds: the first line of /proc/stat, idle and iowait left out."""
    fields = (PROC / "stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(value) for value in fields[:8]
    )
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    """The resident set size of `pid` (VmRSS), in bytes."""
    for line in (PROC / str(pid) / "status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def settle(pid: int, *, quiet_s: float = 0.15, limit_s: float = 5.0) -> None:
    """Return once `pid` used no CPU for `quiet_s` (at most after `limit_s`).

    A bounded poll at a short interval: the harness is not a test, and a
    busy process has nothing else to wait on."""
    deadline = time.monotonic() + limit_s
    last = cpu_seconds(pid)
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.025)
        now = cpu_seconds(pid)
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return
