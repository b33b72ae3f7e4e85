"""`Signals`: datagrams that tell the bench something started elsewhere.

The fake LLM sends `llm:<tag>:<phase>` when a tagged request arrives, and
`bench_wait` (`benchmarks/serve.py`) sends `tool:<tag>` when it starts: the
bench then presses Stop while the LLM call or the tool is really under way,
without guessing with a sleep. UDP on loopback: nothing to connect, and a
lost datagram shows up as a timeout, never as a wrong figure.
"""

from __future__ import annotations

import asyncio

from benchmarks.checks import BenchError


class _Receiver(asyncio.DatagramProtocol):
    def __init__(self, signals: Signals) -> None:
        self.signals = signals

    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        self.signals.event(data.decode(errors="replace")).set()


class Signals:
    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._transport: asyncio.DatagramTransport | None = None
        self.port = 0

    async def open(self) -> Signals:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Receiver(self), local_addr=("127.0.0.1", 0)
        )
        self._transport = transport
        self.port = int(transport.get_extra_info("sockname")[1])
        return self

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def event(self, key: str) -> asyncio.Event:
        event = self._events.get(key)
        if event is None:
            event = self._events[key] = asyncio.Event()
        return event

    async def wait(self, key: str, timeout_s: float = 10.0) -> None:
        """Until the datagram `key` arrived (at once if it already did)."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.event(key).wait()
        except TimeoutError:
            raise BenchError(f"no signal {key!r} within {timeout_s:g}s") from None
        del self._events[key]
