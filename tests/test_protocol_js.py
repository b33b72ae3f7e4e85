"""The chat page's protocol names (frontend/static/js/protocol.js) are current."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.__main__ import main
from backend.protocol import json_schema
from backend.protocol_js import PROTOCOL_JS_PATH, protocol_js

ROOT = Path(__file__).resolve().parent.parent


def test_generated_protocol_js_is_current() -> None:
    """The committed `protocol.js` equals what the current protocol schema generates."""
    expected = protocol_js(json_schema())
    assert (ROOT / PROTOCOL_JS_PATH).read_text(encoding="utf-8") == expected, (
        f"{PROTOCOL_JS_PATH} is stale: run `make schema`"
    )


def test_protocol_js_names_the_frames_updates_and_errors() -> None:
    """The generated module exports `FRAME`, `UPDATE`, `CLIENT`, `ERROR` name maps."""
    text = protocol_js(json_schema())
    assert text.startswith("// GENERATED FILE")
    for line in (
        "export const FRAME = Object.freeze({",
        "  AGENT_UPDATE: 'agent_update',",
        "  RESPONSE_COMPLETE: 'response_complete',",
        "export const UPDATE = Object.freeze({",
        "  AGENT_REQUEST_INPUT: 'agent_request_input',",
        "export const CLIENT = Object.freeze({",
        "  TOOL_APPROVAL_RESPONSE: 'tool_approval_response',",
        "export const ERROR = Object.freeze({",
        "  NO_PENDING_APPROVAL: 'no_pending_approval',",
    ):
        assert line in text.splitlines(), line


def test_schema_write_writes_the_module_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`schema --write` also writes `protocol.js`, identical to the committed one."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / PROTOCOL_JS_PATH).parent.mkdir(parents=True)
    assert main(["schema", "--write"]) == 0
    written = (tmp_path / PROTOCOL_JS_PATH).read_text(encoding="utf-8")
    assert written == (ROOT / PROTOCOL_JS_PATH).read_text(encoding="utf-8")
