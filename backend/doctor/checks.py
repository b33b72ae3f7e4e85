"""What the probes found: one `Check` per row of the report, and the
`Findings` the verdict is made from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from backend.llm.base import Completion
from backend.redaction import bare_urls

Status = Literal["ok", "warn", "fail", "none", "skipped"]
"""`ok` as loopwire needs it; `warn` works, with a caveat or a setting;
`fail` loopwire cannot work around it; `none` nothing to check (no thinking);
`skipped` not tried, after an earlier failure."""

CHECK_NAMES = (
    "models",
    "completion",
    "streaming",
    "stream usage",
    "tool call",
    "control block",
    "reasoning",
)
"""The rows of the report, in the order the probes run."""


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    detail: str


@dataclass
class Findings:
    """Everything the probes learnt about one endpoint."""

    checks: dict[str, Check] = field(default_factory=dict)
    owners: set[str] = field(default_factory=set)
    """The `owned_by` values of the listed models: who the server says it is."""
    listed: tuple[str, ...] | None = None
    """The model ids the server lists; None when it lists none."""
    refusals: dict[str, str] = field(default_factory=dict)
    """The parameters the server refused (400), with its message."""
    replies: list[Completion] = field(default_factory=list)
    """Every completed reply, for the reasoning check."""
    answers: list[str] = field(default_factory=list)
    """The answers as the user would see them (streamed text included)."""
    text_call_format: str | None = None
    """The format a tool call written as text came in, when one did."""

    def add(self, check: Check) -> None:
        self.checks[check.name] = check

    def status(self, name: str) -> Status | None:
        check = self.checks.get(name)
        return None if check is None else check.status

    def detail(self, name: str) -> str:
        check = self.checks.get(name)
        return "" if check is None else check.detail


@dataclass(frozen=True, slots=True)
class Target:
    """The endpoint to probe, and how."""

    base_url: str
    model: str
    api_key: str
    timeout_s: float
    profile: str

    @property
    def shown_url(self) -> str:
        """The base URL without credentials or query, fit to print."""
        return bare_urls(self.base_url.rstrip("/"))
