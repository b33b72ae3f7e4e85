"""Log lines that name the run: the fields in force (`log_fields`), the JSON
format, the short `[run …]` of text lines, and a real server's output with
`LOOPWIRE_LOG_FORMAT=json`."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from backend.chat.run_trace import RUN_SPAN
from backend.telemetry.logs import (
    UVICORN_LOGGERS,
    JsonFormatter,
    RunTagged,
    configure_logging,
    current_fields,
    log_fields,
)
from tests.conftest import make_settings
from tests.fake_openai import ErrorReply, FakeOpenAIServer
from tests.otlp_receiver import ReceivedSpan, running_otlp_receiver
from tests.server_process import ServerProcess, server_process
from tests.ws_client import label

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


class Lines:
    """A logger of its own (outside the logging tree, so nothing else sees
    its records) writing to a string, formatted by `formatter`."""

    def __init__(self, formatter: logging.Formatter, name: str) -> None:
        self.stream = io.StringIO()
        handler = logging.StreamHandler(self.stream)
        handler.setFormatter(formatter)
        self.logger = logging.Logger(f"tests.logs.{name}", logging.DEBUG)
        self.logger.addHandler(handler)

    def text(self) -> list[str]:
        return self.stream.getvalue().splitlines()

    def json(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.text()]


@pytest.fixture
def lines(request: pytest.FixtureRequest) -> Lines:
    return Lines(JsonFormatter("inst-1"), request.node.name)


def test_a_line_is_one_json_object_with_the_message_formatted(lines: Lines) -> None:
    """A record becomes one JSON line: time in UTC with milliseconds, level,
    logger, the message with its `%` arguments, the instance."""
    lines.logger.warning("attempt %d of %d: %s", 1, 3, "naïve")
    [line] = lines.text()
    record = json.loads(line)
    assert list(record) == ["time", "level", "logger", "message", "instance"]
    assert TIME.match(record["time"])
    assert record["level"] == "WARNING"
    assert record["logger"] == lines.logger.name
    assert record["message"] == "attempt 1 of 3: naïve"
    assert record["instance"] == "inst-1"
    assert "naïve" in line  # not escaped: ensure_ascii=False


def test_fields_in_force_are_on_the_lines_merged_and_dropped_on_exit(
    lines: Lines,
) -> None:
    """`log_fields` adds its fields over the outer ones (None dropped) for
    the code inside, and they are gone once it exits."""
    with log_fields(run_id="r1", user="ann"):
        lines.logger.info("outer")
        with log_fields(run_id="r2", conversation_id="c1", trace_id=None):
            assert current_fields() == {
                "run_id": "r2",
                "user": "ann",
                "conversation_id": "c1",
            }
            lines.logger.info("inner")
        lines.logger.info("outer again")
    lines.logger.info("outside")
    assert current_fields() == {}
    fields = [
        {
            k: v
            for k, v in record.items()
            if k in ("run_id", "user", "conversation_id", "trace_id")
        }
        for record in lines.json()
    ]
    assert fields == [
        {"run_id": "r1", "user": "ann"},
        {"run_id": "r2", "user": "ann", "conversation_id": "c1"},
        {"run_id": "r1", "user": "ann"},
        {},
    ]


async def test_a_task_started_inside_keeps_the_fields(lines: Lines) -> None:
    """A task created inside `log_fields` logs with its fields even after the
    block has exited; one created outside has none."""
    go = asyncio.Event()

    async def later(text: str) -> None:
        await go.wait()
        lines.logger.info(text)

    with log_fields(run_id="r1", conversation_id="c1"):
        inside = asyncio.create_task(later("inside"))
    outside = asyncio.create_task(later("outside"))
    go.set()
    await asyncio.gather(inside, outside)
    by_message = {r["message"]: r for r in lines.json()}
    assert by_message["inside"]["run_id"] == "r1"
    assert by_message["inside"]["conversation_id"] == "c1"
    assert "run_id" not in by_message["outside"]


def test_an_exception_is_on_its_line(lines: Lines) -> None:
    """`log.exception` puts the traceback in `exception`, still one line."""
    try:
        raise ValueError("boom")
    except ValueError:
        lines.logger.exception("it failed")
    [line] = lines.text()
    record = json.loads(line)
    assert record["message"] == "it failed"
    assert record["level"] == "ERROR"
    assert record["exception"].startswith("Traceback (most recent call last):")
    assert record["exception"].endswith("ValueError: boom")


def test_extras_are_kept_and_odd_ones_written_as_repr(lines: Lines) -> None:
    """A call's `extra=` values are on the line: JSON ones as they are,
    others as their repr; they never replace the formatter's own keys."""
    lines.logger.info(
        "x",
        extra={
            "attempt": 2,
            "tags": ["a", "b"],
            "path": Path("/tmp/x"),
            "instance": "no",
        },
    )
    [record] = lines.json()
    assert record["attempt"] == 2
    assert record["tags"] == ["a", "b"]
    assert record["path"] == repr(Path("/tmp/x"))
    assert record["instance"] == "inst-1"


def test_what_json_cannot_hold_never_fails_a_line(lines: Lines) -> None:
    """A circular extra, a dict with tuple keys and `%` arguments that do not
    fit the message each still give one JSON line."""
    circular: list[Any] = []
    circular.append(circular)
    lines.logger.info("circular", extra={"loop": circular})
    lines.logger.info("keys", extra={"table": {(1, 2): "x"}})
    lines.logger.info("%d items", "many")
    first, second, third = lines.json()
    assert first["message"] == "circular"
    assert first["loop"] == repr(circular)
    assert second["table"] == repr({(1, 2): "x"})
    assert third["message"] == "'%d items' % ('many',)"


def test_text_lines_of_a_run_start_with_its_short_id() -> None:
    """With the text format a run's lines read `[run <8 of its id>] …`,
    others exactly as before; the record itself is left as it was."""
    lines = Lines(RunTagged(logging.Formatter("%(levelname)s %(message)s")), "text")
    seen: list[logging.LogRecord] = []

    def keep(record: logging.LogRecord) -> bool:
        seen.append(record)
        return True

    lines.logger.addFilter(keep)
    lines.logger.info("before %s", "it")
    with log_fields(run_id="0123456789abcdef"):
        lines.logger.warning("retrying in %.1fs", 0.5)
    assert lines.text() == [
        "INFO before it",
        "WARNING [run 01234567] retrying in 0.5s",
    ]
    assert seen[1].getMessage() == "retrying in 0.5s"


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_configure_logging_sets_the_formatters(
    log_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """json: the root's handlers and uvicorn's get the JSON formatter with
    the instance (a second call, once it is known, replaces the first);
    text: only the root's, tagging a run's lines, and uvicorn's are left."""
    plain = logging.Formatter("%(levelname)s %(message)s")
    handlers = {}
    for name in ("", *UVICORN_LOGGERS):
        handlers[name] = logging.StreamHandler(io.StringIO())
        handlers[name].setFormatter(plain)
        monkeypatch.setattr(logging.getLogger(name), "handlers", [handlers[name]])
    settings = make_settings(log_format=log_format)
    try:
        configure_logging(settings)
        configure_logging(settings, "inst-9")
    finally:
        logging.captureWarnings(False)
    formatters = {name: handler.formatter for name, handler in handlers.items()}
    if log_format == "json":
        made = [f for f in formatters.values() if isinstance(f, JsonFormatter)]
        assert [f.instance for f in made] == ["inst-9"] * len(handlers)
    else:
        root = formatters.pop("")
        assert isinstance(root, RunTagged) and root.inner is plain
        assert set(formatters.values()) == {plain}


def _has_run_span(spans: list[ReceivedSpan]) -> bool:
    return any(s.name == RUN_SPAN for s in spans)


def _parsed(output: list[str]) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in output]
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record), record
        assert TIME.match(record["time"])
    return records


async def test_a_json_server_writes_only_json_lines(tmp_path: Path) -> None:
    """`LOOPWIRE_LOG_FORMAT=json`: every line the server process writes, from
    start to shutdown, is a JSON object; uvicorn's own lines carry the
    instance, its start line among them."""
    database = f"sqlite:///{tmp_path / 'logs.db'}"
    async with server_process(
        database, llm_provider="offline", log_format="json"
    ) as server:
        await server.terminate()
    records = _parsed(server.lines)
    started = [r for r in records if "Uvicorn running on" in r["message"]]
    assert [(r["logger"], r["level"]) for r in started] == [("uvicorn.error", "INFO")]
    uvicorns = [r for r in records if r["logger"].startswith("uvicorn")]
    assert {r["instance"] for r in uvicorns} == {started[0]["instance"]}
    assert any(r["message"].startswith("loopwire: open http://") for r in records)


async def test_a_runs_lines_carry_its_ids(
    fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    """With traces on, the retry warnings of a run whose LLM answers 500
    carry the run's id, its conversation, its user, the instance and the
    trace id of the run's exported span; no line carries another run's."""
    fake_openai.script(
        ErrorReply(500, "upstream broke"), ErrorReply(500, "still broke")
    )
    server = ServerProcess(
        f"sqlite:///{tmp_path / 'logs.db'}",
        llm_base_url=fake_openai.base_url,
        llm_max_retries="1",
        llm_retry_backoff_s="0",
        log_format="json",
    )
    async with running_otlp_receiver() as receiver, AsyncExitStack() as stack:
        server.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        await server.start()
        stack.push_async_callback(server.stop_quietly)
        client = await server.client(stack)
        conversation = str((await client.recv())["session_id"])
        frames = await client.chat("hello")
        await server.terminate()
        spans = await receiver.until(_has_run_span, limit_s=10)
    assert [label(f) for f in frames][-2:] == ["error:llm_error", "response_complete"]
    records = _parsed(server.lines)
    failed = [r for r in records if r["message"].startswith("LLM request failed")]
    assert [r["message"].split(")")[0] for r in failed] == [
        "LLM request failed (attempt 1 of 2",
        "LLM request failed (attempt 2, giving up",
    ]
    started = next(r for r in records if "Uvicorn running on" in r["message"])
    [trace] = {s.trace_id for s in spans if s.name == RUN_SPAN}
    ids = {
        "run_id": frames[-1]["run_id"],
        "conversation_id": conversation,
        "user": "local",
        "instance": started["instance"],
        "trace_id": trace,
    }
    for record in failed:
        assert {key: record.get(key) for key in ids} == ids
    assert {r["run_id"] for r in records if "run_id" in r} == {ids["run_id"]}
