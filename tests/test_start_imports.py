"""What a server loads at start: only what its configuration uses.

A server started without MCP servers, OpenID Connect or traces imports
none of their libraries (the MCP SDK, authlib, the OpenTelemetry SDK):
their modules would only cost memory and start-up time. Checked in a fresh
process, which starts the app and answers a request.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = """
import sys
from starlette.testclient import TestClient
from backend.app import create_app
from tests.conftest import make_settings
app = create_app(make_settings(allowed_hosts="testserver"))
with TestClient(app) as client:
    print(client.get("/api/info").json()["mcp"])
unused = (
    "mcp",
    "mcp_types",
    "authlib",
    "joserfc",
    "opentelemetry.sdk",
    "opentelemetry.exporter",
    "backend.telemetry.otel",
)
print(sorted({m for m in sys.modules if m.startswith(unused)}))
"""


def test_a_server_loads_no_library_its_configuration_does_not_use() -> None:
    """Without `LOOPWIRE_MCP_CONFIG`, OIDC or `OTEL_*` settings, a server
    starts and answers with no MCP SDK, authlib, OpenTelemetry SDK or
    exporter loaded (the MCP SDK would load the OpenTelemetry API alone),
    and says it has no MCP servers."""
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "LOOPWIRE_MCP", "LOOPWIRE_OIDC"))
    }
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-2:] == ["{}", "[]"]
