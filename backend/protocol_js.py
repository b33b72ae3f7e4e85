"""The protocol's names for the chat page: an ES module generated from the schema.

`python -m backend schema --write` (`make schema`) writes it beside the schema,
so the page never types a frame's `type` by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PROTOCOL_JS_PATH = Path("frontend/static/js/protocol.js")
_NAME = re.compile(r"[a-z][a-z0-9_]*")

HEADER = """\
// GENERATED FILE — do not edit. Written by `python -m backend schema --write`
// (`make schema`, backend/protocol_js.py) from the protocol's JSON Schema
// (docs/protocol.schema.json); a test fails when it is stale.
"""


def protocol_js(schema: Mapping[str, Any]) -> str:
    """The ES module of `schema`'s names: frame, update, client and error types."""
    properties = schema["properties"]
    server = properties["server_message"]["discriminator"]["mapping"]
    updates = server["agent_update"]["discriminator"]["mapping"]
    client = properties["client_message"]["discriminator"]["mapping"]
    error_frame = _definition(schema, server["error"])
    errors = error_frame["properties"]["error_type"]["enum"]
    parts = [
        HEADER,
        _constants("FRAME", "`type` of the frames the server sends.", server),
        _constants("UPDATE", "`update_type` of an `agent_update` frame.", updates),
        _constants("CLIENT", "`type` of the messages the page sends.", client),
        _constants("ERROR", "`error_type` of an `error` frame.", errors),
    ]
    return "\n".join(parts)


def _definition(schema: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    prefix = "#/$defs/"
    if not ref.startswith(prefix):
        raise ValueError(f"unexpected $ref {ref!r}")
    definition: Mapping[str, Any] = schema["$defs"][ref.removeprefix(prefix)]
    return definition


def _constants(name: str, doc: str, values: Iterable[str]) -> str:
    lines = [f"/** {doc} */", f"export const {name} = Object.freeze({{"]
    for value in sorted(values):
        if not _NAME.fullmatch(value):
            raise ValueError(f"{name}: {value!r} is not a plain name")
        lines.append(f"  {value.upper()}: '{value}',")
    lines.append("});")
    return "\n".join(lines) + "\n"
