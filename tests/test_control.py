"""Tolerant control-block parsing."""

from __future__ import annotations

from backend.agent.control import parse_control
from backend.protocol import ObserveControl, ReasonControl


def test_fenced_block_is_parsed_and_removed_from_prose() -> None:
    """A fenced JSON control block is parsed and stripped from the prose before it."""
    text = 'I will add.\n\n```json\n{"plan": "add", "finish": false}\n```\n'
    parsed = parse_control(text, ReasonControl)
    assert parsed.prose == "I will add."
    assert parsed.control == ReasonControl(plan="add")


def test_unfenced_last_balanced_object_wins() -> None:
    """Unfenced, the last balanced object is the control; earlier ones stay prose."""
    text = 'Note {"x": 1} then the real one: {"observation": "ok", "should_continue": false}'
    parsed = parse_control(text, ObserveControl)
    assert parsed.control == ObserveControl(observation="ok", should_continue=False)
    assert parsed.prose == 'Note {"x": 1} then the real one:'


def test_braces_inside_strings_do_not_confuse_the_scanner() -> None:
    """Braces and escaped quotes inside JSON strings do not end the object early."""
    text = 'Done. {"observation": "a } and \\" {", "should_continue": true}'
    parsed = parse_control(text, ObserveControl)
    assert parsed.control == ObserveControl(observation='a } and " {')


def test_string_flags_and_nulls_are_forgiven() -> None:
    """A boolean written as a string and a null text field are coerced, not refused."""
    text = '{"plan": "p", "finish": "TRUE", "final_answer": null, "tools_to_consider": ["a"]}'
    parsed = parse_control(text, ReasonControl)
    assert parsed.control == ReasonControl(
        plan="p", finish=True, tools_to_consider=["a"]
    )
    assert parsed.prose == ""


def test_malformed_json_is_prose() -> None:
    """An unterminated JSON object gives no control and the whole text as prose."""
    text = 'Thinking... {"plan": "unterminated'
    parsed = parse_control(text, ReasonControl)
    assert parsed.control is None and parsed.prose == text


def test_wrong_types_are_prose() -> None:
    """A block whose fields fail the schema gives no control and stays prose."""
    text = '```json\n{"should_continue": "maybe"}\n```'
    parsed = parse_control(text, ObserveControl)
    assert parsed.control is None and parsed.prose == text


def test_a_non_object_fence_falls_back_to_an_inline_object() -> None:
    """A fenced JSON array is passed over for a later inline object."""
    text = '```json\n[1, 2]\n```\nthen {"plan": "x"}'
    parsed = parse_control(text, ReasonControl)
    assert parsed.control == ReasonControl(plan="x")


def test_no_json_at_all() -> None:
    """Text with no JSON gives no control and the prose without its outer spaces."""
    parsed = parse_control("  just words  ", ReasonControl)
    assert (parsed.prose, parsed.control) == ("just words", None)
