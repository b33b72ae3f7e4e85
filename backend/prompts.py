"""`PromptProvider`: the prompt files in `prompts/`, rendered strictly.

One typed method per template. Templates use Jinja2 with `StrictUndefined`, so
a misspelt variable is an error, never a silently empty prompt; `check()`
renders every template once at start-up so a broken file fails fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from backend.errors import ConfigError

DEFAULT_PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


@dataclass(frozen=True, slots=True)
class ToolLine:
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class ResultLine:
    """One act-phase result as the observe prompt shows it."""

    name: str
    status: str
    arguments: str
    content: str


class PromptProvider:
    def __init__(self, directory: Path = DEFAULT_PROMPTS_DIR) -> None:
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(directory),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
            trim_blocks=False,
        )

    def system_prompt(self, *, tools: Sequence[ToolLine]) -> str:
        return self._render("system_prompt.md", tools=tools)

    def agent_reason_prompt(
        self,
        *,
        question: str,
        step: int,
        max_steps: int,
        tools: Sequence[ToolLine],
        observations: Sequence[str],
        can_ask_user: bool,
    ) -> str:
        return self._render(
            "agent_reason_prompt.md",
            question=question,
            step=step,
            max_steps=max_steps,
            tools=tools,
            observations=observations,
            can_ask_user=can_ask_user,
        )

    def agent_act_prompt(
        self, *, step: int, max_steps: int, plan: str, tools_to_consider: Sequence[str]
    ) -> str:
        return self._render(
            "agent_act_prompt.md",
            step=step,
            max_steps=max_steps,
            plan=plan,
            tools_to_consider=tools_to_consider,
        )

    def agent_observe_prompt(
        self,
        *,
        question: str,
        step: int,
        max_steps: int,
        plan: str,
        results: Sequence[ResultLine],
        act_note: str,
    ) -> str:
        return self._render(
            "agent_observe_prompt.md",
            question=question,
            step=step,
            max_steps=max_steps,
            plan=plan,
            results=results,
            act_note=act_note,
        )

    def final_answer_prompt(
        self, *, question: str, why: str, observations: Sequence[str]
    ) -> str:
        return self._render(
            "final_answer_prompt.md",
            question=question,
            why=why,
            observations=observations,
        )

    def check(self) -> None:
        """Render every template with sample values; raise ConfigError if any fails."""
        tools = [ToolLine("calculator", "Evaluate arithmetic.")]
        result = ResultLine("calculator", "ok", '{"expression": "1+1"}', "2")
        self.system_prompt(tools=tools)
        self.agent_reason_prompt(
            question="q",
            step=1,
            max_steps=2,
            tools=tools,
            observations=["o"],
            can_ask_user=True,
        )
        self.agent_act_prompt(step=1, max_steps=2, plan="p", tools_to_consider=["c"])
        self.agent_observe_prompt(
            question="q", step=1, max_steps=2, plan="p", results=[result], act_note=""
        )
        self.final_answer_prompt(question="q", why="w", observations=["o"])

    def _render(self, name: str, **values: Any) -> str:
        try:
            return self._env.get_template(name).render(**values).strip()
        except jinja2.TemplateError as exc:
            raise ConfigError(
                f"prompt template {name} failed to render: {exc}"
            ) from exc
