"""Several real loopwire processes on PostgreSQL and Redis, behind nginx.

`running_cluster(database_url, redis_url, size=3, **settings)` starts `size`
instances (`python -m backend serve`, each on its own port, all with
`LOOPWIRE_REDIS_URL`) and a round-robin nginx in front
(`devcluster/nginx_server.py`). Which instance served a connection or a
request is read from its `X-Loopwire-Instance` header. nginx sends each new
request to the next instance in turn, so `after(instance)` lines the next
one up to land elsewhere: requests through the balancer, never pinned.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
from websockets.asyncio.client import connect

from devcluster.nginx_server import Balancer
from tests.server_process import ServerProcess
from tests.ws_client import Client

HEADER = "x-loopwire-instance"


class ClusterHarness:
    def __init__(
        self, database_url: str, redis_url: str, size: int, **settings: str
    ) -> None:
        settings = {"redis_url": redis_url, **settings}
        self.processes = [ServerProcess(database_url, **settings) for _ in range(size)]
        self.ids: dict[str, ServerProcess] = {}
        """Instance id → its process."""
        self.balancer: Balancer | None = None
        self.http: httpx.AsyncClient | None = None
        self._order: list[str] = []

    async def start(self) -> ClusterHarness:
        await asyncio.gather(*(p.start() for p in self.processes))
        async with httpx.AsyncClient() as direct:
            for process in self.processes:
                response = await direct.get(f"http://127.0.0.1:{process.port}/healthz")
                self.ids[response.headers[HEADER]] = process
        self.balancer = Balancer([p.port for p in self.processes])
        await asyncio.to_thread(self.balancer.start)
        self.http = httpx.AsyncClient(base_url=self.balancer.url, timeout=30)
        return self

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.aclose()
        if self.balancer is not None:
            await asyncio.to_thread(self.balancer.stop)
        await asyncio.gather(
            *(p.stop_quietly() for p in self.processes), return_exceptions=True
        )

    def print_logs(self, lines: int = 40) -> None:
        """The end of each instance's log (pytest shows it with a failure)."""
        for instance, process in self.ids.items() or enumerate(self.processes):
            print(f"--- instance {instance} (port {process.port}) ---")
            print("\n".join(list(process.lines)[-lines:]))

    def process(self, instance_id: str) -> ServerProcess:
        return self.ids[instance_id]

    def others(self, instance_id: str) -> list[str]:
        return [i for i in self.ids if i != instance_id]

    async def connect(
        self,
        stack: AsyncExitStack,
        query: str = "",
        headers: dict[str, str] | None = None,
    ) -> tuple[Client, str]:
        """A WebSocket through the balancer, and the instance it reached."""
        assert self.balancer is not None
        url = self.balancer.ws_url + (f"?{query}" if query else "")
        connection = await stack.enter_async_context(
            connect(url, max_size=1 << 22, additional_headers=headers)
        )
        assert connection.response is not None
        return Client(connection), connection.response.headers[HEADER]

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        assert self.http is not None
        return await self.http.request(method, path, **kwargs)

    async def after(self, instance_id: str) -> None:
        """Make the next request through the balancer land on another
        instance than `instance_id`: ask until `instance_id` answers (nginx
        goes round the instances in order)."""
        for _ in range(len(self.ids) * 2):
            response = await self.request("GET", "/healthz")
            if response.headers[HEADER] == instance_id:
                return
        raise AssertionError(f"{instance_id} never answered through the balancer")

    async def before(self, instance_id: str) -> None:
        """Make the next request through the balancer land on `instance_id`."""
        if not self._order:  # one turn round the instances shows their order
            for _ in self.ids:
                response = await self.request("GET", "/healthz")
                self._order.append(response.headers[HEADER])
        position = self._order.index(instance_id)
        await self.after(self._order[position - 1])

    async def kill(self, instance_id: str) -> int:
        return await self.process(instance_id).kill()

    async def took_over(self, conversation_id: str) -> str:
        """The instance that logs taking the conversation over (waits)."""
        line = f"took over conversation {conversation_id}"
        waits = {
            asyncio.ensure_future(p.logged(line)): instance
            for instance, p in self.ids.items()
            if p.running
        }
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            return waits[done.pop()]
        finally:
            for task in waits:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*waits, return_exceptions=True)


@asynccontextmanager
async def running_cluster(
    database_url: str, redis_url: str, *, size: int = 3, **settings: Any
) -> AsyncIterator[ClusterHarness]:
    cluster = ClusterHarness(
        database_url, redis_url, size, **{k: str(v) for k, v in settings.items()}
    )
    try:
        yield await cluster.start()
    except BaseException:
        cluster.print_logs()  # shown with the failure
        raise
    finally:
        await cluster.stop()


LEASE_S = 2.0
"""The lease in cluster tests: an instance's death is noticed within it."""
