"""Whether a JSON value fits a JSON Schema, said for people: the first
problem found, at the field it concerns (`unit: 'x' is not one of ['km',
'mi']`), or None. A schema that is itself broken is a problem too."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError


def schema_problem(schema: dict[str, Any], value: Any) -> str | None:
    """What is wrong with `value` under `schema`, or None if it fits."""
    try:
        validator = _validator(_frozen(schema))
    except SchemaError as exc:
        return f"its schema is not valid: {exc.message}"
    error = next(iter(validator.iter_errors(value)), None)
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


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
def _validator(frozen: Any) -> Draft202012Validator:
    """A checked validator per schema (checking a schema costs more than
    using it: a tool's schema is checked once, not per call)."""
    schema = _thawed(frozen)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)
