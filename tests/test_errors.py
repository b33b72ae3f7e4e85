"""The exception tree drawn in backend/errors.py is the one in the code."""

from __future__ import annotations

import importlib
import re

import pytest

import backend.errors as errors
from backend.errors import (
    Busy,
    InvalidMessage,
    LoopwireError,
    Moved,
    NoActiveRun,
    NoPendingApproval,
    NoPendingInput,
    ProtocolError,
    StoreUnavailable,
    Unavailable,
)

DRAWN = re.compile(r"[├└]── (\w+)\s+(\.\.\. )?(?:([\w/]+)\.py:)?")


def drawn() -> list[tuple[str, str]]:
    """(class name, module) for every class the docstring's tree draws: a
    seam's module is named on its row (`store/base.py:`), and rows that go
    on with `...` are in the module of the row above."""
    assert errors.__doc__ is not None
    found = []
    module = "backend.errors"
    for name, same, where in DRAWN.findall(errors.__doc__):
        if where:
            module = "backend." + where.replace("/", ".")
        elif not same:
            module = "backend.errors"
        found.append((name, module))
    return found


def test_every_drawn_exception_exists_and_is_a_loopwire_error() -> None:
    """Each name in the tree is a class of the module it names, under LoopwireError."""
    tree = drawn()
    assert len(tree) >= 30
    missing = []
    for name, module in tree:
        if name == "LoopwireError":
            continue
        found = getattr(importlib.import_module(module), name, None)
        if found is None:
            missing.append(f"{module}.{name}")
        elif not issubclass(found, LoopwireError):
            missing.append(f"{module}.{name} is not a LoopwireError")
    assert missing == []


@pytest.mark.parametrize(
    "kind",
    [
        InvalidMessage,
        Busy,
        NoPendingInput,
        NoPendingApproval,
        NoActiveRun,
        StoreUnavailable,
        Unavailable,
        Moved,
    ],
)
def test_a_refusal_from_another_instance_is_raised_as_its_own_class(
    kind: type[ProtocolError],
) -> None:
    """`of_type` gives back the class an error_type names (no instance patched)."""
    error = ProtocolError.of_type(kind.error_type, "told")
    assert (type(error), error.error_type, str(error)) == (
        kind,
        kind.error_type,
        "told",
    )


def test_an_unknown_error_type_is_an_invalid_message() -> None:
    """A refusal of a type this instance does not know stays a refusal."""
    assert type(ProtocolError.of_type("from_the_future", "x")) is InvalidMessage
