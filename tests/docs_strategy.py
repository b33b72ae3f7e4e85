"""The example strategy of docs/architecture.md ("Writing a strategy"), loaded
from the document itself, so the docs cannot drift from what runs."""

from __future__ import annotations

import re
import types
from pathlib import Path

from backend.agent.phases import PhasedStrategy

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def example_source() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Writing a strategy", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "docs/architecture.md lost its example strategy"
    return match.group(1)


def example_strategy() -> type[PhasedStrategy]:
    """The one `PhasedStrategy` the example defines, from a module of its own."""
    module = types.ModuleType("docs_example_strategy")
    exec(compile(example_source(), str(DOC), "exec"), module.__dict__)
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, PhasedStrategy)
        and value is not PhasedStrategy
    ]
    assert len(found) == 1, found
    return found[0]
