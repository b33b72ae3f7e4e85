"""`PromptProvider`: the prompt files in `prompts/`, rendered strictly.

One typed method per template. Templates use Jinja2 with `StrictUndefined`, so
a misspelt variable is an error, never a silently empty prompt; `check()`
renders every template once at start-up so a broken file fails fast. Files
are read once: an edited prompt takes effect when the server restarts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jinja2
from pydantic import BaseModel, ConfigDict

from backend.errors import ConfigError

AskWith = Literal["tool", "control", "none"]
"""How the model may ask the user: the `request_input` tool, a control-block
field (`ask_user`), or not at all."""

DEFAULT_PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


@dataclass(frozen=True, slots=True)
class ToolLine:
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class FileLine:
    """One file of the conversation, as the manifest in a prompt lists it."""

    id: str
    name: str
    media_type: str
    size: str
    """For people and models: `12.3 KB`."""
    description: str
    origin: str


def file_lines(files: Sequence[Any]) -> list[FileLine]:
    """The manifest of `files` (`FileInfo`s), at most `MANIFEST_FILES`, newest kept."""
    return [
        FileLine(
            id=f.id,
            name=f.name,
            media_type=f.media_type,
            size=_size(f.size),
            description=f.description,
            origin=f.origin,
        )
        for f in list(files)[-MANIFEST_FILES:]
    ]


MANIFEST_FILES = 50
"""Files a prompt lists at most (the newest)."""


def _size(size: int) -> str:
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.1f} KB"
    return f"{size / 1_000_000:.1f} MB"


class ResultLine(BaseModel):
    """One act-phase result as the observe prompt shows it (kept in run state)."""

    model_config = ConfigDict(frozen=True)

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
            auto_reload=False,  # read once: no stat() of the file per render
        )
        self._systems: dict[tuple[ToolLine, ...], str] = {}

    def system_prompt(self, *, tools: Sequence[ToolLine]) -> str:
        """Rendered once per tool list (it depends on nothing else)."""
        key = tuple(tools)
        text = self._systems.get(key)
        if text is None:
            if len(self._systems) >= 64:
                self._systems.clear()
            text = self._systems[key] = self._render("system_prompt.md", tools=tools)
        return text

    def custom_instructions(self, *, user: str, conversation: str) -> str:
        """The user's own instructions then the conversation's, delimited;
        empty when there are none (`chat/instructions.py`)."""
        if not (user or conversation):
            return ""
        return self._render(
            "custom_instructions.md", user=user, conversation=conversation
        )

    def agent_reason_prompt(
        self,
        *,
        question: str,
        step: int,
        max_steps: int,
        tools: Sequence[ToolLine],
        observations: Sequence[str],
        ask: AskWith,
        files: Sequence[FileLine] = (),
    ) -> str:
        return self._render(
            "agent_reason_prompt.md",
            question=question,
            step=step,
            max_steps=max_steps,
            tools=tools,
            observations=observations,
            ask=ask,
            files=files,
        )

    def agent_plan_prompt(
        self,
        *,
        question: str,
        tools: Sequence[ToolLine],
        observations: Sequence[str],
        previous_plan: Sequence[str],
        revision: int,
        can_ask_user: bool,
        files: Sequence[FileLine] = (),
    ) -> str:
        return self._render(
            "agent_plan_prompt.md",
            question=question,
            tools=tools,
            observations=observations,
            previous_plan=previous_plan,
            revision=revision,
            can_ask_user=can_ask_user,
            files=files,
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
        can_replan: bool = False,
    ) -> str:
        return self._render(
            "agent_observe_prompt.md",
            question=question,
            step=step,
            max_steps=max_steps,
            plan=plan,
            results=results,
            act_note=act_note,
            can_replan=can_replan,
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

    def cited_answer_prompt(self, *, question: str, found: bool) -> str:
        """After a retrieval: answer from the passages found, citing them."""
        return self._render("cited_answer_prompt.md", question=question, found=found)

    def check(self) -> None:
        """Render every template with sample values; raise ConfigError if any fails."""
        tools = [ToolLine("calculator", "Evaluate arithmetic.")]
        files = [FileLine("f1", "a.csv", "text/csv", "1.2 KB", "d", "upload")]
        result = ResultLine(
            name="calculator",
            status="ok",
            arguments='{"expression": "1+1"}',
            content="2",
        )
        self.system_prompt(tools=tools)
        self.custom_instructions(user="u", conversation="c")
        asks: tuple[AskWith, ...] = ("tool", "control", "none")
        for ask in asks:
            self.agent_reason_prompt(
                question="q",
                step=1,
                max_steps=2,
                tools=tools,
                observations=["o"],
                ask=ask,
                files=files,
            )
        self.agent_plan_prompt(
            question="q",
            tools=tools,
            observations=["o"],
            previous_plan=["p"],
            revision=2,
            can_ask_user=True,
            files=files,
        )
        self.agent_act_prompt(step=1, max_steps=2, plan="p", tools_to_consider=["c"])
        for can_replan in (False, True):
            self.agent_observe_prompt(
                question="q",
                step=1,
                max_steps=2,
                plan="p",
                results=[result],
                act_note="",
                can_replan=can_replan,
            )
        self.final_answer_prompt(question="q", why="w", observations=["o"])
        for found in (False, True):
            self.cited_answer_prompt(question="q", found=found)

    def _render(self, name: str, **values: Any) -> str:
        try:
            return self._env.get_template(name).render(**values).strip()
        except jinja2.TemplateError as exc:
            raise ConfigError(
                f"prompt template {name} failed to render: {exc}"
            ) from exc
