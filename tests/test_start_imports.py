"""What a server loads at start: only what its configuration uses.

A server started without MCP servers, OpenID Connect, JWT bearer tokens,
data sources or traces imports none of their libraries (the MCP SDK,
authlib, PyJWT with cryptography, the sources' index and readers, the
OpenTelemetry SDK): their modules would only cost memory and start-up
time. Nor does it load what only a request needs: AG-UI's models (the
first AG-UI request imports them) and jsonschema (the first tool call or
question with a form). `serve` on the offline model and a database already at the head
revision imports no Alembic (nor Mako), no HTTP client, and no part of the
command-line client (rich, markdown-it, pygments). Checked in fresh
processes.
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
unused = (
    "mcp",
    "mcp_types",
    "authlib",
    "joserfc",
    "jwt",
    "cryptography",
    "backend.identity.jwks",
    "backend.identity.jwt_bearer",
    "backend.sources.data_sources",
    "backend.sources.index",
    "backend.sources.readers",
    "opentelemetry.sdk",
    "opentelemetry.exporter",
    "backend.telemetry.otel",
    "ag_ui",
    "backend.transport.ag_ui_runs",
    "jsonschema",
    "referencing",
)
with TestClient(app) as client:
    print(client.get("/api/info").json()["mcp"])
    print(sorted({m for m in sys.modules if m.startswith(unused)}))
    refused = client.post("/api/ag-ui", json={"threadId": "t"})
    print(refused.status_code, [f["field"] for f in refused.json()["fields"]])
    print(sorted({m.split(".")[0] for m in sys.modules if m.startswith(unused)}))
"""
SERVE = """
import sys
import backend.server
from backend.__main__ import main

async def ready(server):  # started, migrated, listening: tell, and stop
    left_out = (
        "alembic", "mako", "pygments", "rich", "markdown_it", "loopwire", "httpx2",
        "sqlalchemy.dialects.postgresql",
    )
    print(sorted({p for p in left_out for m in sys.modules if m.startswith(p)}))

backend.server.Server.main_loop = ready
sys.exit(main(["serve", "--port", "0"]))
"""
CONFIGURED = ("OTEL_", "OPENAI_", "LOOPWIRE_")
"""Settings left out of the environment: each server runs on the defaults."""


def _run(program: str, **settings: str) -> list[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(CONFIGURED)}
    environment.update(settings)
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip().splitlines()


def test_a_server_loads_no_library_its_configuration_does_not_use() -> None:
    """On the defaults, a server starts and answers with no MCP SDK,
    authlib, PyJWT, cryptography, sources' index or readers, OpenTelemetry
    SDK or exporter loaded (the MCP SDK would load the
    OpenTelemetry API alone), no AG-UI models and no jsonschema, and says
    it has no MCP servers. Its AG-UI route is there all the same: the first
    request loads the models, which read the input (here, refuse it)."""
    assert _run(PROGRAM)[-4:] == [
        "{}",
        "[]",
        "400 ['runId', 'messages']",
        "['ag_ui', 'backend']",
    ]


def test_serve_on_a_migrated_database_loads_no_alembic_nor_the_client(
    tmp_path: Path,
) -> None:
    """`serve` on a new SQLite file migrates it with Alembic; started again
    on it, it is ready without Alembic, Mako, PostgreSQL's dialect, the HTTP client (only OIDC, JWT
    keys, MCP or an OpenAI-compatible model need it) or the command-line
    client (whose terminal would bring rich, markdown-it and pygments)."""
    settings = {
        "LOOPWIRE_DATABASE_URL": f"sqlite:///{tmp_path / 'loopwire.db'}",
        "LOOPWIRE_FILES_DIR": str(tmp_path / "files"),
        "LOOPWIRE_HOST": "127.0.0.1",
    }
    first = _run(SERVE, **settings)[-1]
    assert "'alembic'" in first
    assert _run(SERVE, **settings)[-1] == "[]"
