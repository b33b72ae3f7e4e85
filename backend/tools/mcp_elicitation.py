"""An MCP server's questions during a tool call (`elicitation/create`),
put to the person behind the run that made the call.

The SDK calls one callback per connection (`Routes.callback`). Which call
asks? At protocol 2026-07-28 the question comes back as the call's own
result (`InputRequiredResult`) and the SDK asks the callback from the
calling task, so the call is found in a context variable. At earlier
protocols the server sends a request of its own, read by the connection's
task; then the call is the only one in flight on that connection that can
ask, and when several are, nobody can tell which asks: the server is told
so (an error), never a wrong person asked.

A form is shown with loopwire's answer forms (`answer_forms.py`):
MCP's restricted schema is translated (titled choices become plain ones,
`format` a hint in the description); a form loopwire cannot show (a
multi-select) is refused with the reason. A link (URL mode) is shown for
the person to open.

What goes wrong on the run's side while it asks (a shutdown parks the run;
its checkpoint cannot be written) is not the server's business: the server
hears `cancel`, and the calling task raises it (`Routes.call`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import mcp_types
from mcp.client.session import ClientRequestContext, ElicitationFnT

from backend.aio import race
from backend.answer_forms import Unsupported, checked
from backend.tools.elicitation import Asker, Elicitation

log = logging.getLogger("backend.tools.mcp")

T = TypeVar("T")

_SCALARS = {
    "string": ("minLength", "maxLength"),
    "number": ("minimum", "maximum"),
    "integer": ("minimum", "maximum"),
    "boolean": (),
}
_NOTES = ("title", "description", "default")


@dataclass(eq=False)
class _Caller:
    """One call in flight that may ask, and what went wrong while it did."""

    ask: Asker
    failure: BaseException | None = None
    failed: asyncio.Event = field(default_factory=asyncio.Event)


_CALLER: contextvars.ContextVar[_Caller | None] = contextvars.ContextVar(
    "mcp_caller", default=None
)


class Routes:
    """The calls in flight on one server's connections, for its questions."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._callers: set[_Caller] = set()

    async def call(self, ask: Asker | None, work: Coroutine[Any, Any, T]) -> T:
        """`work` (a `tools/call`), able to put the server's questions to
        the person through `ask` (None: the server hears `decline`)."""
        if ask is None:
            return await work
        caller = _Caller(ask)
        token = _CALLER.set(caller)
        self._callers.add(caller)
        try:
            won = await race(work, caller.failed.wait())
        finally:
            self._callers.discard(caller)
            _CALLER.reset(token)
        if caller.failure is not None:
            raise caller.failure
        assert won is not None and won[0] == 0
        result: T = won[1]
        return result

    @property
    def callback(self) -> ElicitationFnT:
        return self._elicit

    async def _elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        caller = _CALLER.get() or self._only_caller()
        if isinstance(caller, str):
            log.warning("MCP server %r asked, but %s", self.server, caller)
            return _refusal(f"loopwire cannot ask: {caller}")
        try:
            elicitation = self._elicitation(params)
        except Unsupported as exc:
            log.warning(
                "MCP server %r asked with a form it cannot show: %s", self.server, exc
            )
            return _refusal(f"loopwire cannot show this form: {exc}")
        try:
            reply = await caller.ask(elicitation)
        except Exception as exc:  # the run's problem: raised in the calling task
            caller.failure = exc
            caller.failed.set()
            return mcp_types.ElicitResult(action="cancel")
        content = reply.content if reply.action == "accept" else None
        return mcp_types.ElicitResult(action=reply.action, content=content)

    def _only_caller(self) -> _Caller | str:
        if not self._callers:
            return "none of its calls is in flight"
        if len(self._callers) > 1:
            return (
                f"{len(self._callers)} of its calls are in flight and its protocol "
                "does not say which one asks"
            )
        return next(iter(self._callers))

    def _elicitation(self, params: mcp_types.ElicitRequestParams) -> Elicitation:
        asked_by = f"the MCP server '{self.server}'"
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            return Elicitation(params.message, asked_by, url=params.url)
        return Elicitation(
            params.message, asked_by, schema=form(params.requested_schema)
        )


def form(requested: dict[str, Any]) -> dict[str, Any]:
    """MCP's form schema as an answer form; `Unsupported` if it cannot be one."""
    properties = requested.get("properties")
    if requested.get("type", "object") != "object" or not isinstance(properties, dict):
        raise Unsupported("a form must be an object with properties")
    shown = {name: _field(name, spec) for name, spec in properties.items()}
    schema: dict[str, Any] = {"type": "object", "properties": shown}
    required = requested.get("required")
    if isinstance(required, list) and required:
        schema["required"] = [name for name in required if name in shown]
    schema["additionalProperties"] = False
    return checked(schema)


def _field(name: str, spec: object) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise Unsupported(f"field {name!r} is not a JSON object")
    kind = spec.get("type")
    choices = _choices(spec)
    if kind == "array":
        raise Unsupported(f"field {name!r} asks for several choices at once")
    if kind not in _SCALARS:
        raise Unsupported(f"field {name!r} has type {kind!r}")
    shown: dict[str, Any] = {"type": kind}
    for key in (*_NOTES, *_SCALARS[str(kind)]):
        if key in spec:
            shown[key] = spec[key]
    if choices is not None:
        shown["enum"] = choices
    if isinstance(spec.get("format"), str):
        hint = f"({spec['format']})"
        shown["description"] = f"{shown.get('description', '')} {hint}".strip()
    return shown


def _choices(spec: dict[str, Any]) -> list[Any] | None:
    """The field's choices: `enum`, or the `const`s of a titled `oneOf`."""
    if "enum" in spec:
        return list(spec["enum"])
    titled = spec.get("oneOf") or spec.get("anyOf")
    if isinstance(titled, list) and all(
        isinstance(o, dict) and "const" in o for o in titled
    ):
        return [option["const"] for option in titled]
    return None


def _refusal(message: str) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=message)
