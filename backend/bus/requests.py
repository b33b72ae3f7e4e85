"""`Requests`: commands to other instances through Redis, and their replies.

A request is published to the asked instance's inbox (`C` + a `Request`'s
JSON) and waits for the `Answer` with its id (`R` + JSON) in its own inbox.
What arrives is validated here, once: a malformed command is logged and
answered with an `invalid_message` error when it says where to, a malformed
reply is logged and dropped (its request times out). Commands are answered
by `on_command` in the bus's TaskGroup, at most `max_commands` at once; one
more is refused with `unavailable`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable

import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.exceptions import RedisError

from backend.bus.base import (
    Answer,
    BusError,
    Command,
    CommandHandler,
    InstanceGone,
    Reply,
    Request,
    answer_adapter,
    request_adapter,
)
from backend.bus.connection import Warnings, inbox
from backend.bus.outgoing import Outgoing

log = logging.getLogger(__name__)

MAX_COMMANDS = 256
"""Most commands from other instances handled at once."""


class Requests:
    def __init__(
        self,
        redis: aioredis.Redis,
        instance_id: str,
        *,
        outgoing: Outgoing,
        on_command: Callable[[], CommandHandler],
        max_commands: int,
        warnings: Warnings,
    ) -> None:
        self._redis = redis
        self.instance_id = instance_id
        self._outgoing = outgoing
        self._on_command = on_command
        self.max_commands = max_commands
        self._warnings = warnings
        self._pending: dict[str, asyncio.Future[Reply]] = {}
        self.tasks: asyncio.TaskGroup | None = None
        """Where commands are answered (None: not running, none is)."""
        self.answering: set[asyncio.Task[None]] = set()

    async def request(
        self, instance_id: str, command: Command, timeout_s: float
    ) -> Reply:
        """Ask another instance; `BusError` if it cannot be reached in time."""
        request = Request(uuid.uuid4().hex, self.instance_id, command)
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[request.id] = future
        payload = "C" + request_adapter.dump_json(request).decode()
        try:
            receivers = await self._redis.publish(inbox(instance_id), payload)
            if not receivers:
                raise InstanceGone(f"instance {instance_id} is not running")
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError as exc:
            raise BusError(
                f"instance {instance_id} did not answer within {timeout_s:g} s"
            ) from exc
        except (RedisError, OSError) as exc:
            raise BusError(f"cannot reach instance {instance_id}: {exc}") from exc
        finally:
            self._pending.pop(request.id, None)

    def arrived(self, data: str) -> None:
        """A message in this instance's inbox: a reply, or a command."""
        kind, text = data[:1], data[1:]
        if kind == "R":
            self._replied(text)
        elif kind == "C" and self.tasks is not None:
            self._asked(text, self.tasks)

    def _replied(self, text: str) -> None:
        try:
            answer = answer_adapter.validate_json(text)
        except ValidationError as exc:
            log.error("bus: a malformed reply, dropped: %s", exc)
            return
        future = self._pending.get(answer.id)
        if future is not None and not future.done():
            future.set_result(answer.reply)

    def _asked(self, text: str, tasks: asyncio.TaskGroup) -> None:
        try:
            request = request_adapter.validate_json(text)
        except ValidationError as exc:
            self._malformed(text, exc)
            return
        if len(self.answering) >= self.max_commands:
            self._refuse(request)
            return
        task = tasks.create_task(self._answer(request))
        self.answering.add(task)
        task.add_done_callback(self.answering.discard)

    def _malformed(self, text: str, exc: ValidationError) -> None:
        """Log a command that is not one, and tell its sender if it can be
        told (its envelope names it)."""
        log.error("bus: a malformed command: %s", exc)
        try:
            envelope = json.loads(text)
            request_id, reply_to = str(envelope["id"]), str(envelope["reply_to"])
        except (ValueError, TypeError, KeyError):
            return
        refusal = Reply(
            "error",
            error_type="invalid_message",
            message=f"instance {self.instance_id} cannot read the command",
        )
        self._reply(request_id, reply_to, refusal)

    async def _answer(self, request: Request) -> None:
        command = request.command
        try:
            reply = await self._on_command()(command)
        except Exception:  # the asker hears of it; the log has the traceback
            log.exception("bus: command %s failed", command.kind)
            reply = Reply(
                "error",
                error_type="internal_error",
                message=f"internal error on instance {self.instance_id}",
            )
        self._reply(request.id, request.reply_to, reply)

    def _reply(self, request_id: str, reply_to: str, reply: Reply) -> None:
        """Queue `reply` (never dropped: there is one per command)."""
        payload = answer_adapter.dump_json(Answer(request_id, reply)).decode()
        self._outgoing.reply(inbox(reply_to), "R" + payload)

    def _refuse(self, request: Request) -> None:
        self._warnings.warn(
            "busy",
            "bus: %d commands in progress; commands refused: %d",
            self.max_commands,
        )
        busy = Reply(
            "error",
            error_type="unavailable",
            message=f"instance {self.instance_id} is too busy; try again",
        )
        self._reply(request.id, request.reply_to, busy)
