"""Unexpected failures reach the client as an incident id, never as a
traceback, an exception's text or a path on the server."""

from __future__ import annotations

import logging
import re

import httpx
import pytest

from tests.conftest import StartServer
from tests.fakes import ScriptedLLM, reason, test_registry

SECRET = "/srv/loopwire/secret-path.db: password=hunter2"
INCIDENT = re.compile(r"incident ([0-9a-f]{12})")


async def test_a_failing_route_answers_with_an_incident_id(
    start_server: StartServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A crashing route answers 500 with only an incident id; the log has details."""
    harness = await start_server(ScriptedLLM(), test_registry())

    async def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError(SECRET)

    monkeypatch.setattr(harness.service.store, "conversations", broken)
    async with httpx.AsyncClient(base_url=harness.server.url("")) as http:
        failed = await http.get("/api/conversations")
        fine = await http.get("/api/info")
    request_id = failed.headers["x-request-id"]
    assert failed.status_code == 500
    assert failed.json() == {
        "error_type": "internal_error",
        "message": f"something went wrong on the server (incident {request_id}; "
        "the server log has the details)",
    }
    assert "secret" not in failed.text and "Traceback" not in failed.text
    assert re.fullmatch(r"[0-9a-f]{12}", fine.headers["x-request-id"])
    assert fine.headers["x-request-id"] != request_id
    (record,) = [r for r in caplog.records if r.name == "backend.transport.incidents"]
    assert record.getMessage() == f"request {request_id}: GET /api/conversations failed"
    assert record.exc_info is not None and SECRET in str(record.exc_info[1])


async def test_a_run_that_fails_unexpectedly_names_only_an_incident(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A crashing run ends with an `internal_error` naming only a logged incident."""
    caplog.set_level(logging.ERROR)
    harness = await start_server(
        ScriptedLLM(reason(), RuntimeError(SECRET)), test_registry()
    )
    client, _ = await harness.ready_client()
    frames = await client.chat("go", agent_mode=True)
    (error,) = [f for f in frames if f["type"] == "error"]
    case = INCIDENT.search(error["message"])
    assert case is not None and error["error_type"] == "internal_error"
    assert error["message"] == (
        f"internal error: the run was ended (incident {case[1]}; the server log "
        "has the details)"
    )
    assert "secret" not in "".join(str(f) for f in frames)
    logged = [r for r in caplog.records if case[1] in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None
