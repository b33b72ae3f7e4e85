"""Safe arithmetic: a small evaluator over Python's `ast`, never `eval`.

Only numbers, the arithmetic operators, parentheses, a fixed set of math
functions and the constants `pi` and `e` are accepted; everything else is a
`ToolError` that names what was refused. Sizes are bounded so an expression
cannot make the server compute (or print) an astronomically large number.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from backend.errors import ToolError

Number = int | float

MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 10_000
MAX_RESULT_DIGITS = 1_000
_MAX_RESULT_BITS = int(MAX_RESULT_DIGITS * math.log2(10))
_MAX_ROUND_DIGITS = 100

TIMES_SIGN = "\N{MULTIPLICATION SIGN}"
DIVISION_SIGN = "\N{DIVISION SIGN}"
MINUS_SIGN = "\N{MINUS SIGN}"
_COURTESIES = {"^": "**", TIMES_SIGN: "*", DIVISION_SIGN: "/", MINUS_SIGN: "-"}


def _round(value: Number, ndigits: int | None = None) -> Number:
    if ndigits is None:
        return round(value)
    if not isinstance(ndigits, int) or abs(ndigits) > _MAX_ROUND_DIGITS:
        raise ToolError(
            f"round() digits must be an integer within ±{_MAX_ROUND_DIGITS}"
        )
    return round(value, ndigits)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}

_ALLOWED_HINT = (
    f"use numbers, + - * / // % ** (or ^), parentheses, "
    f"the functions {', '.join(sorted(FUNCTIONS))} and the constants pi, e"
)

_REFUSED: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Compare: "comparisons",
    ast.BoolOp: "boolean operators (and/or)",
    ast.Lambda: "lambda expressions",
    ast.IfExp: "conditional expressions",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.JoinedStr: "strings",
    ast.Starred: "unpacking",
    ast.NamedExpr: "assignments",
}


def normalize(expression: str) -> str:
    """The expression with courtesy operators (^, times and division signs)
    made Python."""
    text = expression.strip().rstrip("=").strip()
    for courtesy, python in _COURTESIES.items():
        text = text.replace(courtesy, python)
    return text


def evaluate(expression: str) -> int | float:
    """The value of `expression`: an int when integral, else a float."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(
            f"expression is too long ({len(expression)} characters; "
            f"the limit is {MAX_EXPRESSION_CHARS})"
        )
    tree = _parse(normalize(expression))
    try:
        value = _eval(tree.body)
    except RecursionError:
        raise ToolError("expression is too deeply nested") from None
    return _tidy(value)


def pretty(expression: str) -> str:
    """A readable form for answers: `2+2*3` -> `2 + 2 x 3` with a times sign."""
    try:
        text = ast.unparse(ast.parse(normalize(expression), mode="eval"))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return expression.strip()
    text = text.replace(" ** ", "^").replace(" * ", f" {TIMES_SIGN} ")
    return text.replace(" / ", f" {DIVISION_SIGN} ")


def format_number(value: float) -> str:
    """A number as people write it: `16.0934`, `32`, `1.5e-07`."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".12g")


def _parse(text: str) -> ast.Expression:
    if not text:
        raise ToolError("empty expression; " + _ALLOWED_HINT)
    try:
        return ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"invalid expression: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError):
        raise ToolError("invalid expression") from None


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant):
        return _constant(node.value)
    if isinstance(node, ast.BinOp):
        return _binary(node)
    if isinstance(node, ast.UnaryOp):
        return _unary(node)
    if isinstance(node, ast.Call):
        return _call(node)
    if isinstance(node, ast.Name):
        return _name(node.id)
    raise ToolError(f"{_describe(node)} not allowed; {_ALLOWED_HINT}")


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"attribute access ('.{node.attr}') is"
    what = _REFUSED.get(type(node), f"'{type(node).__name__}' expressions")
    return f"{what} are"


def _constant(value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, str | bytes):
            raise ToolError(f"strings are not allowed; {_ALLOWED_HINT}")
        raise ToolError(f"the constant {value!r} is not allowed; {_ALLOWED_HINT}")
    return _checked(value)


def _name(name: str) -> Number:
    if name in CONSTANTS:
        return CONSTANTS[name]
    if name in FUNCTIONS:
        raise ToolError(f"function '{name}' must be called, e.g. {name}(2)")
    raise ToolError(f"name '{name}' is not allowed; {_ALLOWED_HINT}")


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_SYMBOLS: dict[type[ast.operator], str] = {
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^ (as a bitwise operator)",
    ast.MatMult: "@",
}


def _binary(node: ast.BinOp) -> Number:
    kind = type(node.op)
    if kind is ast.Pow:
        return _power(_eval(node.left), _eval(node.right))
    function = _BINARY.get(kind)
    if function is None:
        symbol = _SYMBOLS.get(kind, kind.__name__)
        raise ToolError(f"the operator {symbol} is not allowed; {_ALLOWED_HINT}")
    return _apply(function, _eval(node.left), _eval(node.right))


def _unary(node: ast.UnaryOp) -> Number:
    operand = _eval(node.operand)
    if isinstance(node.op, ast.USub):
        return -operand
    if isinstance(node.op, ast.UAdd):
        return operand
    symbol = "not" if isinstance(node.op, ast.Not) else "~"
    raise ToolError(f"the operator {symbol} is not allowed; {_ALLOWED_HINT}")


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(
            f"exponent {format_number(exponent)} is too large "
            f"(the limit is ±{MAX_EXPONENT})"
        )
    exact = isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1
    if exact and exponent * math.log2(abs(base)) > _MAX_RESULT_BITS:
        raise _too_large()
    return _apply(operator.pow, base, exponent)


def _call(node: ast.Call) -> Number:
    if not isinstance(node.func, ast.Name):
        raise ToolError(f"{_describe(node.func)} not allowed; {_ALLOWED_HINT}")
    name = node.func.id
    function = FUNCTIONS.get(name)
    if function is None:
        raise ToolError(
            f"function '{name}' is not allowed; "
            f"allowed functions: {', '.join(sorted(FUNCTIONS))}"
        )
    if node.keywords:
        raise ToolError(f"keyword arguments are not allowed in {name}()")
    args = [_eval(arg) for arg in node.args]
    try:
        return _apply(function, *args)
    except TypeError:
        raise ToolError(f"wrong number or kind of arguments for {name}()") from None
    except ValueError as exc:
        raise ToolError(f"{name}() cannot take these arguments ({exc})") from None


def _apply(function: Callable[..., Any], *args: Number) -> Number:
    try:
        value = function(*args)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise _too_large() from None
    return _checked(value)


def _checked(value: Any) -> Number:
    if isinstance(value, complex):
        raise ToolError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value):
            raise ToolError("the result is not a number")
        raise _too_large()
    if isinstance(value, int) and value.bit_length() > _MAX_RESULT_BITS:
        raise _too_large()
    if not isinstance(value, int | float):
        raise ToolError("the result is not a number")
    return value


def _too_large() -> ToolError:
    return ToolError(
        f"the result is too large (the limit is about {MAX_RESULT_DIGITS} digits)"
    )


def _tidy(value: Number) -> int | float:
    if isinstance(value, int):
        return value
    rounded = float(f"{value:.15g}")
    if rounded.is_integer() and abs(rounded) < 2**53:
        return int(rounded)
    return rounded
