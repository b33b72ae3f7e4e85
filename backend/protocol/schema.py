"""Both directions of the protocol as one JSON Schema document."""

from __future__ import annotations

from typing import Any

from backend.protocol.client import client_message_adapter
from backend.protocol.frames import server_message_adapter
from backend.protocol.values import PROTOCOL_VERSION


def json_schema() -> dict[str, Any]:
    """Both directions as one JSON Schema document (what `docs/` exports)."""
    client = client_message_adapter.json_schema(ref_template="#/$defs/{model}")
    server = server_message_adapter.json_schema(ref_template="#/$defs/{model}")
    defs = {**client.pop("$defs", {}), **server.pop("$defs", {})}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"loopwire protocol v{PROTOCOL_VERSION}",
        "type": "object",
        "properties": {"client_message": client, "server_message": server},
        "$defs": defs,
    }
