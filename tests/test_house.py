"""The house rules of docs/architecture.md that a reader feels first: no
module of backend/ over 450 lines, no function over 60, and every test says
in its docstring what behaviour it proves."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES = 450
FUNCTION_LINES = 60


def functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    return [node for node in ast.walk(tree) if isinstance(node, kinds)]


def test_no_module_is_over_450_lines() -> None:
    """Each module of backend/ fits in 450 lines: a big one is cut at its seams."""
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "backend").rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines() -> None:
    """Each function of backend/ fits in 60 lines, docstring included."""
    long = {
        f"{path.relative_to(ROOT)}:{node.name}": size
        for path in sorted((ROOT / "backend").rglob("*.py"))
        for node in functions(path)
        if (size := (node.end_lineno or node.lineno) - node.lineno + 1) > FUNCTION_LINES
    }
    assert long == {}


def test_every_test_says_what_it_proves() -> None:
    """Each test function has a docstring, a sentence a reader can check it by."""
    silent = [
        f"{path.relative_to(ROOT)}:{node.name}"
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        for node in functions(path)
        if node.name.startswith("test") and ast.get_docstring(node) is None
    ]
    assert silent == []
