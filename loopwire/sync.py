"""`SyncAgentClient`: the client for code that is not async (scripts, notebooks).

It runs an `AgentClient` on an event loop of its own, in a thread it starts
and joins, so it works where an event loop already runs (Jupyter) and where
none does. Every method blocks until the client's coroutine is done; an
exception raised there is raised here. Ctrl-C (KeyboardInterrupt) while a
chat is being read cancels the read and stops the run.

```python
with SyncAgentClient("ws://127.0.0.1:8000/ws", on_question=lambda q: "km") as c:
    print(c.run("convert 10 miles").answer)
```
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from types import TracebackType
from typing import Any, TypeVar

from backend.protocol import Remember
from loopwire.client import AgentClient, RunResult
from loopwire.connection import Event

T = TypeVar("T")


async def _next(events: AsyncIterator[Event]) -> Event | None:
    """The next event, or None at the end (a future cannot carry
    StopAsyncIteration across threads cleanly)."""
    return await anext(events, None)


class SyncAgentClient:
    """`AgentClient`'s methods, blocking; the same arguments."""

    def __init__(self, url: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="loopwire-client", daemon=True
        )
        self._thread.start()
        try:
            self.client: AgentClient = self._call(self._make(url, options))
            self._call(self.client.__aenter__())
        except BaseException:
            self._halt()
            raise

    @staticmethod
    async def _make(url: str, options: dict[str, Any]) -> AgentClient:
        return AgentClient(url, **options)  # made on its own loop

    def __enter__(self) -> SyncAgentClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if not self._loop.is_closed():
            try:
                self._call(self.client.aclose())
            finally:
                self._halt()

    def _halt(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # on KeyboardInterrupt; a no-op once it is done
            raise

    @property
    def session_id(self) -> str:
        return self.client.session_id

    def conversations(self, **options: Any) -> list[dict[str, Any]]:
        """`AgentClient.conversations`: the user's conversations, newest first."""
        return self._call(self.client.conversations(**options))

    def chat(self, content: str, **options: Any) -> Iterator[Event]:
        """The run's frames, as `AgentClient.chat` yields them."""
        events = self.client.chat(content, **options)
        try:
            while (event := self._call(_next(events))) is not None:
                yield event
        except KeyboardInterrupt:
            self.stop()
            raise
        finally:
            self._call(events.aclose())

    def run(self, content: str, **options: Any) -> RunResult:
        return self._call(self.client.run(content, **options))

    def stop(self) -> None:
        self._call(self.client.stop())

    def stop_after_step(self) -> None:
        self._call(self.client.stop_after_step())

    def grant_steps(self, steps: int) -> None:
        self._call(self.client.grant_steps(steps))

    def grant_budget(
        self,
        *,
        tokens: int | None = None,
        cost_usd: float | None = None,
        time_s: float | None = None,
    ) -> None:
        self._call(
            self.client.grant_budget(tokens=tokens, cost_usd=cost_usd, time_s=time_s)
        )

    def answer(self, text: str) -> None:
        self._call(self.client.answer(text))

    def decline(self, *, dismiss: bool = False) -> None:
        self._call(self.client.decline(dismiss=dismiss))

    def approve(
        self,
        call_id: str,
        approved: bool,
        reason: str | None = None,
        *,
        arguments: dict[str, Any] | None = None,
        remember: Remember | None = None,
    ) -> None:
        self._call(
            self.client.approve(
                call_id, approved, reason, arguments=arguments, remember=remember
            )
        )
