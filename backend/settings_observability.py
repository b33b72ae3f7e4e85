"""The settings of what the server tells its operators: the log format and
who may read `/metrics` (`Settings` has them). Traces are configured by the
standard `OTEL_*` environment variables instead (`backend/telemetry/`)."""

from __future__ import annotations

from typing import Literal

from pydantic_settings import BaseSettings

LogFormat = Literal["text", "json"]


class ObservabilitySettings(BaseSettings):
    log_format: LogFormat = "text"
    """text: lines for people; json: one JSON object per line, a run's lines
    carrying its run, conversation, user, instance and trace ids."""
    metrics_public: bool = False
    """Serve `GET /metrics` without credentials (for a scraper on a private
    network); by default it is protected like the rest of the API."""
