"""Log lines that name the run: the fields of the code running now, and the
JSON format (`LOOPWIRE_LOG_FORMAT=json`).

`log_fields(run_id=..., ...)` puts fields on every line logged inside it,
tasks it starts included (a `ContextVar`, which asyncio copies into each new
task). With the JSON format each line is one object: `time`, `level`,
`logger`, `message`, the fields in force, `instance`, whatever `extra=` a
call passed, and `exception` when there is one. Text, the default, is left
as it always was: lines for people.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Protocol

_EMPTY: Mapping[str, str] = MappingProxyType({})
_FIELDS: ContextVar[Mapping[str, str]] = ContextVar(
    "loopwire_log_fields", default=_EMPTY
)

UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")
"""Loggers uvicorn sets up with handlers of their own (not the root's)."""

_RECORD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None))
) | {"message", "asctime", "taskName", "color_message"}
"""What every record has (and uvicorn's coloured copy of its message): not
a call's `extra=`."""


@contextlib.contextmanager
def log_fields(**fields: str | None) -> Iterator[None]:
    """`fields` (None dropped) on every line logged inside, over those
    already in force; tasks created inside inherit them."""
    merged = {**_FIELDS.get(), **{k: v for k, v in fields.items() if v is not None}}
    token = _FIELDS.set(MappingProxyType(merged))
    try:
        yield
    finally:
        _FIELDS.reset(token)


def current_fields() -> Mapping[str, str]:
    return _FIELDS.get()


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line.

    The keys `time` (RFC 3339, UTC, milliseconds), `level`, `logger`,
    `message`, `instance`, `exception` and `stack` are the formatter's own;
    the fields in force come next, then a call's `extra=` values that do not
    clash with those. A value JSON cannot hold is written as its `repr`:
    formatting never fails on what a call passed.
    """

    def __init__(self, instance: str | None = None) -> None:
        super().__init__()
        self.instance = instance

    def format(self, record: logging.LogRecord) -> str:
        line = self._line(record)
        try:
            return json.dumps(line, ensure_ascii=False, default=repr)
        except (TypeError, ValueError, RecursionError):
            # a circular extra, a dict with odd keys: every value its repr
            safe = {key: _plain(value) for key, value in line.items()}
            return json.dumps(safe, ensure_ascii=False, default=repr)

    def _line(self, record: logging.LogRecord) -> dict[str, Any]:
        line: dict[str, Any] = {
            "time": _rfc3339(record),
            "level": record.levelname,
            "logger": record.name,
            "message": _message(record),
        }
        for key, value in _FIELDS.get().items():
            line.setdefault(key, value)
        if self.instance is not None:
            line["instance"] = self.instance
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and key not in line:
                line[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return line


def _rfc3339(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


def _message(record: logging.LogRecord) -> str:
    """The message with its arguments; a call whose `%` arguments do not
    fit gets both, unformatted, rather than no line."""
    try:
        return record.getMessage()
    except Exception:
        return f"{record.msg!r} % {record.args!r}"


def _plain(value: object) -> object:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


class RunTagged(logging.Formatter):
    """Text lines as `inner` writes them, a run's message starting with
    `[run <first 8 of its id>]` so that people can follow one run."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        run = _FIELDS.get().get("run_id")
        if run is None:
            return self.inner.format(record)
        saved = record.msg, record.args
        record.msg, record.args = f"[run {run[:8]}] {_message(record)}", None
        try:
            return self.inner.format(record)
        finally:  # other handlers (and a second formatting) see it unchanged
            record.msg, record.args = saved


class _LogSettings(Protocol):
    @property
    def log_format(self) -> str: ...


def configure_logging(settings: _LogSettings, instance: str | None = None) -> None:
    """Set the process's log lines up as `settings.log_format` says.

    json: the JSON formatter on the root logger's handlers and uvicorn's,
    and Python's warnings logged too, so every line the process writes is
    JSON. Call it once the root has its handlers, and again after
    `uvicorn.Config` has set up uvicorn's loggers, with `instance` when it
    is known: each call replaces the formatters. text: the lines stay as
    they are, but for a run's, which start with a short `[run …]`
    (`RunTagged`, on the root's handlers only).
    """
    if settings.log_format != "json":
        for handler in logging.getLogger().handlers:
            if not isinstance(handler.formatter, RunTagged | None):
                handler.setFormatter(RunTagged(handler.formatter))
        return
    logging.captureWarnings(True)
    formatter = JsonFormatter(instance)
    loggers = [logging.getLogger(), *map(logging.getLogger, UVICORN_LOGGERS)]
    for logger in loggers:
        for handler in logger.handlers:
            handler.setFormatter(formatter)


def say(settings: _LogSettings, text: str, *, error: bool = False) -> None:
    """A line of the server's start for its operator: printed (stderr if
    `error`), or with the JSON format logged, so that it is JSON too."""
    if settings.log_format == "json":
        logging.getLogger("loopwire").log(
            logging.ERROR if error else logging.INFO, text
        )
    else:
        print(text, file=sys.stderr if error else sys.stdout)
