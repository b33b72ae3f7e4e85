"""The layering rules of docs/architecture.md, checked on the imports of
every module: a layer may use the ones below it, never one above or beside
it that it has no business knowing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BACKEND = Path(__file__).resolve().parent.parent / "backend"

RULES = [
    ("llm", ("backend.tools", "backend.chat", "backend.agent", "backend.store")),
    ("store", ("backend.llm", "backend.chat", "backend.agent", "backend.transport")),
    ("bus", ("backend.llm", "backend.chat", "backend.agent", "backend.transport")),
    ("transport", ("backend.agent",)),
    ("notifications.py", ("backend.llm", "backend.chat", "backend.agent")),
    ("transcript.py", ("backend.",)),
    (
        "telemetry",
        (
            "backend.llm",
            "backend.chat",
            "backend.agent",
            "backend.store",
            "backend.transport",
            "backend.bus",
            "backend.tools",
        ),
    ),
]
"""(a package or module of backend/, the modules it must not import)."""


def imported(module: Path) -> list[str]:
    """Every module `module` imports, absolute names."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def modules_of(part: str) -> list[Path]:
    where = BACKEND / part
    return sorted(where.rglob("*.py")) if where.is_dir() else [where]


@pytest.mark.parametrize(("part", "forbidden"), RULES, ids=[r[0] for r in RULES])
def test_a_layer_imports_nothing_above_it(
    part: str, forbidden: tuple[str, ...]
) -> None:
    """`part` imports none of the modules its rule forbids."""
    modules = modules_of(part)
    assert modules, f"backend/{part} is gone: update RULES"
    broken = {
        str(module.relative_to(BACKEND)): bad
        for module in modules
        if (bad := [n for n in imported(module) if n.startswith(forbidden)])
    }
    assert broken == {}


def test_only_the_tracing_module_loads_opentelemetry() -> None:
    """OpenTelemetry is imported by `telemetry/otel.py` alone, which only a
    server with traces on imports (`test_tracing.py` checks it)."""
    importers = sorted(
        str(module.relative_to(BACKEND))
        for module in BACKEND.rglob("*.py")
        if any(n.startswith("opentelemetry") for n in imported(module))
    )
    assert importers == ["telemetry/otel.py"]
