"""Every prompt template renders with realistic values; mistakes fail loudly."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.errors import ConfigError
from backend.prompts import PromptProvider, ResultLine, ToolLine

TOOLS = [
    ToolLine("calculator", "Evaluate an arithmetic expression."),
    ToolLine("current_time", "The current time in a timezone."),
]


@pytest.fixture
def prompts() -> PromptProvider:
    return PromptProvider()


def test_system_prompt_lists_tools(prompts: PromptProvider) -> None:
    """The system prompt lists each tool and its description, or that there are none."""
    text = prompts.system_prompt(tools=TOOLS)
    assert "- `calculator`: Evaluate an arithmetic expression." in text
    assert "No tools are available" in prompts.system_prompt(tools=[])


def test_reason_prompt(prompts: PromptProvider) -> None:
    """The reason prompt shows step, request, findings, tools, and asking if allowed."""
    text = prompts.agent_reason_prompt(
        question="What is 17% of 2,340?",
        step=2,
        max_steps=10,
        tools=TOOLS,
        observations=["The user wants a percentage.", "calculator returned 397.8"],
        ask="tool",
    )
    assert text.startswith("# Agent step 2 of 10: REASON")
    assert 'The user\'s request: "What is 17% of 2,340?"' in text
    assert "- Step 2: calculator returned 397.8" in text
    assert "- `current_time`: The current time in a timezone." in text
    assert "- `request_input`:" in text
    assert '{"plan": "what you will do in this step"' in text
    assert "ask_user" not in text
    first = prompts.agent_reason_prompt(
        question="q", step=1, max_steps=1, tools=[], observations=[], ask="none"
    )
    assert "nothing has been done yet" in first and "You have no tools" in first
    assert "request_input" not in first and "ask_user" not in first
    assert '"tools_to_consider": [],' in first


def test_reason_prompt_asking_through_the_control_block(
    prompts: PromptProvider,
) -> None:
    """With control-block asking, the reason prompt offers `ask_user`, no tool."""
    text = prompts.agent_reason_prompt(
        question="convert 10 miles",
        step=1,
        max_steps=3,
        tools=[],
        observations=[],
        ask="control",
    )
    assert "request_input" not in text
    assert '"final_answer": "", "ask_user": ""}' in text
    assert 'put one short\nquestion in `"ask_user"`' in text


def test_plan_prompt(prompts: PromptProvider) -> None:
    """The plan prompt lists the tools, and on a replan the old plan and findings."""
    text = prompts.agent_plan_prompt(
        question="3*7 and the time in London",
        tools=TOOLS,
        observations=[],
        previous_plan=[],
        revision=1,
        can_ask_user=True,
    )
    assert text.startswith("# Planning\n")
    assert "- `calculator`: Evaluate an arithmetic expression." in text
    assert "- `request_input`:" in text
    assert '{"steps": ["first step", "second step"], "final_answer": ""}' in text
    again = prompts.agent_plan_prompt(
        question="q",
        tools=[],
        observations=["the calculator failed"],
        previous_plan=["Calculate", "Answer"],
        revision=2,
        can_ask_user=False,
    )
    assert again.startswith("# Planning again (plan 2)")
    assert "1. Calculate\n2. Answer" in again
    assert "- the calculator failed" in again and "- (no tools)" in again
    assert "request_input" not in again


def test_act_prompt(prompts: PromptProvider) -> None:
    """The act prompt gives the plan to carry out and the tools reason considered."""
    text = prompts.agent_act_prompt(
        step=1,
        max_steps=3,
        plan="Compute 0.17 * 2340",
        tools_to_consider=["calculator"],
    )
    assert "Carry out this plan now: Compute 0.17 * 2340" in text
    assert "Tools you considered: calculator." in text


def test_observe_prompt(prompts: PromptProvider) -> None:
    """The observe prompt shows results, the act note if none ran, replan if asked."""
    text = prompts.agent_observe_prompt(
        question="What is 17% of 2,340?",
        step=1,
        max_steps=3,
        plan="Compute it",
        results=[
            ResultLine(
                name="calculator",
                status="ok",
                arguments='{"expression": "0.17*2340"}',
                content="397.8",
            )
        ],
        act_note="",
    )
    assert "## `calculator` (ok)" in text
    assert 'Arguments: {"expression": "0.17*2340"}' in text
    assert "397.8" in text
    assert '"should_continue": true' in text
    empty = prompts.agent_observe_prompt(
        question="q", step=1, max_steps=1, plan="p", results=[], act_note="No action."
    )
    assert "No tool was called in this step. The act phase said: No action." in empty
    assert "replan" not in text
    replanning = prompts.agent_observe_prompt(
        question="q",
        step=1,
        max_steps=1,
        plan="p",
        results=[],
        act_note="",
        can_replan=True,
    )
    assert '"final_answer": "", "replan": false}' in replanning


def test_final_answer_prompt(prompts: PromptProvider) -> None:
    """The final-answer prompt states why the run ended and what was observed."""
    text = prompts.final_answer_prompt(
        question="q?", why="The step budget (3) ran out.", observations=["found 397.8"]
    )
    assert "The step budget (3) ran out." in text and "- found 397.8" in text


def test_check_renders_every_template(prompts: PromptProvider) -> None:
    """Every shipped prompt template renders without error."""
    prompts.check()


def test_a_misspelt_variable_is_an_error(tmp_path: Path) -> None:
    """A template naming an undefined variable fails `check` with a `ConfigError`."""
    source = Path(__file__).resolve().parent.parent / "prompts"
    for template in source.glob("*.md"):
        (tmp_path / template.name).write_text(template.read_text())
    (tmp_path / "agent_act_prompt.md").write_text("Plan: {{ plna }}")
    broken = PromptProvider(tmp_path)
    with pytest.raises(
        ConfigError, match=r"agent_act_prompt\.md failed to render: 'plna' is undefined"
    ):
        broken.check()
