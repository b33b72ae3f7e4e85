"""Questions as forms: the JSON Schema a `request_input` question may carry
for its answer, checked when asked and enforced when answered.

What a model may ask for (anything else is dropped and the question is
asked as free text, never an error for the user):

- a choice: `{"type": "string", "enum": ["km", "mi"]}` (at most
  `MAX_CHOICES` options, shown as buttons);
- yes/no: `{"type": "boolean"}`;
- a number: `{"type": "number" | "integer", "minimum": 1, "maximum": 10}`;
- text: `{"type": "string"}` (lengths optional);
- a small object whose properties are each one of the above.

The answer is the text a person sends: for a `string` schema the text
itself, for any other the JSON text of the value (`42`, `true`,
`{"unit": "km"}`). One that does not fit is refused with `InvalidAnswer`
saying why, and the question goes on waiting.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from backend.errors import InvalidAnswer
from backend.schema_check import first_error, schema_fault

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

log = logging.getLogger(__name__)

MAX_SCHEMA_BYTES = 8 * 1024
MAX_CHOICES = 20
MAX_CHOICE_CHARS = 100
MAX_PROPERTIES = 10

_NOTES = frozenset({"title", "description", "default", "examples"})
_SCALAR_KEYWORDS = {
    "string": frozenset({"type", "enum", "minLength", "maxLength"}),
    "boolean": frozenset({"type"}),
    "number": frozenset({"type", "minimum", "maximum"}),
    "integer": frozenset({"type", "minimum", "maximum"}),
}
_OBJECT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties"})


class Unsupported(ValueError):
    """A schema a question cannot be asked with (the reason says why)."""


def accept_schema(raw: object) -> dict[str, Any] | None:
    """`raw` if it is a supported answer schema; None (free text) when it is
    absent, or bad or unsupported (logged)."""
    if raw is None:
        return None
    try:
        return checked(raw)
    except Unsupported as exc:
        log.warning("answer_schema dropped, asked as free text: %s", exc)
        return None


def checked(raw: object) -> dict[str, Any]:
    """`raw`, a valid and supported answer schema; `Unsupported` if not."""
    if not isinstance(raw, dict):
        raise Unsupported("not a JSON object")
    try:
        size = len(json.dumps(raw, ensure_ascii=False).encode())
    except (TypeError, ValueError) as exc:
        raise Unsupported(f"not JSON: {exc}") from exc
    if size > MAX_SCHEMA_BYTES:
        raise Unsupported(f"{size} bytes of JSON (at most {MAX_SCHEMA_BYTES})")
    fault = schema_fault(raw)
    if fault is not None:
        raise Unsupported(f"not a valid JSON Schema: {fault}")
    if raw.get("type") == "object":
        _check_object(raw)
    else:
        _check_scalar(raw, "the answer")
    return raw


def _check_object(schema: dict[str, Any]) -> None:
    _only(schema, _OBJECT_KEYWORDS, "the answer")
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise Unsupported("an object schema needs properties")
    if len(properties) > MAX_PROPERTIES:
        raise Unsupported(f"{len(properties)} properties (at most {MAX_PROPERTIES})")
    if not isinstance(schema.get("additionalProperties", False), bool):
        raise Unsupported("additionalProperties must be true or false")
    for name, sub in properties.items():
        _check_scalar(sub, f"property {name!r}")


def _check_scalar(schema: object, what: str) -> None:
    if not isinstance(schema, dict):
        raise Unsupported(f"{what}: not a JSON object")
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in _SCALAR_KEYWORDS:
        raise Unsupported(f"{what}: type {kind!r} is not supported")
    _only(schema, _SCALAR_KEYWORDS[kind], what)
    if "enum" in schema:
        _check_choices(schema["enum"], what)


def _check_choices(choices: list[Any], what: str) -> None:
    if not 1 <= len(choices) <= MAX_CHOICES:
        raise Unsupported(f"{what}: {len(choices)} choices (1 to {MAX_CHOICES})")
    for choice in choices:
        if not isinstance(choice, str) or not choice.strip():
            raise Unsupported(f"{what}: choice {choice!r} is not a non-empty string")
        if len(choice) > MAX_CHOICE_CHARS:
            raise Unsupported(f"{what}: a choice over {MAX_CHOICE_CHARS} characters")


def _only(schema: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    extra = sorted(set(schema) - allowed - _NOTES)
    if extra:
        raise Unsupported(f"{what}: keywords not supported: {', '.join(extra)}")


def check_answer(schema: dict[str, Any] | None, content: str) -> None:
    """Refuse (`InvalidAnswer`) an answer `content` that does not fit
    `schema` (None: free text, anything goes)."""
    if schema is None:
        return
    value = answer_value(schema, content)
    error = first_error(schema, value)
    if error is not None:
        raise InvalidAnswer(_problem(error))


def answer_value(schema: dict[str, Any], content: str) -> Any:
    """The value an answer's text stands for under `schema`."""
    if schema.get("type") == "string":
        return content
    try:
        return json.loads(content, parse_constant=_no_constant)
    except ValueError:
        raise InvalidAnswer(
            f"the answer must be {_expected(schema)}, written as JSON"
        ) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _problem(error: ValidationError) -> str:
    """What is wrong, said for a person: `the answer must be one of: km, mi`,
    `field 'count' must be at most 10`."""
    path = [str(part) for part in error.absolute_path]
    subject = f"field {'.'.join(path)!r}" if path else "the answer"
    schema = error.schema if isinstance(error.schema, dict) else {}
    match error.validator:
        case "enum":
            return f"{subject} must be one of: {', '.join(map(str, schema['enum']))}"
        case "minimum":
            return f"{subject} must be at least {schema['minimum']}"
        case "maximum":
            return f"{subject} must be at most {schema['maximum']}"
        case "minLength":
            return f"{subject} must be at least {schema['minLength']} characters"
        case "maxLength":
            return f"{subject} must be at most {schema['maxLength']} characters"
        case "type":
            return f"{subject} must be {_expected(schema)}"
        case "required":
            given = error.instance if isinstance(error.instance, dict) else {}
            missing = [n for n in schema["required"] if n not in given]
            return f"the answer must have the field {missing[0]!r}"
        case _:
            return f"{subject}: {error.message}"


def _expected(schema: dict[str, Any]) -> str:
    return {
        "boolean": "true or false",
        "number": "a number",
        "integer": "a whole number",
        "object": "an object",
        "string": "text",
    }.get(str(schema.get("type")), "a value")
