"""Whether a JSON value fits a JSON Schema, said for people: the first
problem found, at the field it concerns (`unit: 'x' is not one of ['km',
'mi']`), or None. A schema that is itself broken is a problem too.

The one module that uses jsonschema (with attrs, referencing and rpds,
2-3 MB of a server's memory). It is imported by the first check, not when
the server starts: nothing checks a schema before a question (or an MCP
server's elicitation) asks for a form (`answer_forms.py`) or an approval
edits a call's arguments.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


def schema_problem(schema: dict[str, Any], value: Any) -> str | None:
    """What is wrong with `value` under `schema`, or None if it fits."""
    validator = _validator(_frozen(schema))
    if isinstance(validator, str):
        return f"its schema is not valid: {validator}"
    error = next(iter(validator.iter_errors(value)), None)
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def schema_fault(schema: dict[str, Any]) -> str | None:
    """Why `schema` is no valid JSON Schema (Draft 2020-12), or None."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return exc.message
    return None


def first_error(schema: dict[str, Any], value: Any) -> ValidationError | None:
    """The first way `value` does not fit `schema` (a valid one), or None."""
    from jsonschema import Draft202012Validator

    return next(iter(Draft202012Validator(schema).iter_errors(value)), None)


def _frozen(schema: Any) -> Any:
    """A hashable copy of a JSON value (for the validator cache)."""
    if isinstance(schema, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in schema.items()))
    if isinstance(schema, list):
        return ("__list__", tuple(_frozen(v) for v in schema))
    return schema


def _thawed(frozen: Any) -> Any:
    if isinstance(frozen, tuple) and frozen[:1] == ("__list__",):
        return [_thawed(v) for v in frozen[1]]
    if isinstance(frozen, tuple):
        return {k: _thawed(v) for k, v in frozen}
    return frozen


@lru_cache(maxsize=256)
def _validator(frozen: Any) -> Draft202012Validator | str:
    """A checked validator per schema, or why the schema is not valid
    (checking a schema costs more than using it: a tool's schema is checked
    once, not per call)."""
    from jsonschema import Draft202012Validator

    schema = _thawed(frozen)
    fault = schema_fault(schema)
    return Draft202012Validator(schema) if fault is None else fault
