"""A named pipe that child processes append lines to, read without polling."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path


@asynccontextmanager
async def fifo(
    directory: Path, name: str
) -> AsyncIterator[tuple[str, asyncio.StreamReader]]:
    """The pipe's path (for the writers) and a reader of its lines."""
    path = directory / name
    os.mkfifo(path)
    read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    keep_open = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # no EOF between writers
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0)
    )
    try:
        yield str(path), reader
    finally:
        transport.close()
        os.close(keep_open)
