"""The built-in tools: calculator, current_time, convert_units."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from backend.errors import ToolError
from backend.tools.base import Tool, ToolContext, ToolEffect, ToolRegistry
from backend.tools.builtin import builtin_tools
from backend.tools.notes import MemoryNotebook, note_tools

FIXED = datetime(2026, 11, 22, 13, 5, 42, 123456, tzinfo=UTC)
CTX = ToolContext(session_id="s")


def tools() -> dict[str, Tool[Any]]:
    return {tool.name: tool for tool in builtin_tools(clock=lambda: FIXED)}


async def run(name: str, **arguments: Any) -> Any:
    tool = tools()[name]
    return await tool(tool.args_model(**arguments), CTX)


async def calc(expression: str) -> Any:
    result = await run("calculator", expression=expression)
    assert result["expression"] == expression
    return result["result"]


async def calc_error(expression: str) -> str:
    with pytest.raises(ToolError) as caught:
        await run("calculator", expression=expression)
    return str(caught.value)


# --- the set -------------------------------------------------------------------


def test_builtin_tools_are_fresh_read_only_and_registrable() -> None:
    """Each call builds three new read-only, idempotent tools that a registry takes."""
    first, second = builtin_tools(), builtin_tools()
    assert [t.name for t in first] == ["calculator", "current_time", "convert_units"]
    assert first is not second
    effect = ToolEffect(read_only=True, idempotent=True, untrusted_result=False)
    assert all(t.effect == effect for t in first)
    assert ToolRegistry(first).names == ("calculator", "current_time", "convert_units")


def test_every_tool_says_what_it_does_for_people() -> None:
    """The UI shows `people_summary`; the model gets `description`."""
    tools = [*builtin_tools(), *note_tools(MemoryNotebook())]
    assert {t.name: t.people_summary for t in tools} == {
        "calculator": "Works out arithmetic exactly.",
        "current_time": "Tells the current date and time in a city or timezone.",
        "convert_units": "Converts lengths, weights, temperatures, speeds and more.",
        "save_note": "Saves a note for you to find later; asks you first.",
        "list_notes": "Lists the notes you saved.",
        "delete_note": "Deletes one of your saved notes; asks you first.",
    }

    class NoArgs(BaseModel):
        pass

    async def nothing(args: NoArgs, ctx: ToolContext) -> None:
        return None

    bare = Tool("probe", "Checks a host. Use it when asked to ping.", NoArgs, nothing)
    assert bare.people_summary == "Checks a host."  # the first sentence
    assert Tool("x", "No full stop", NoArgs, nothing).people_summary == "No full stop"


def test_specs_describe_every_argument() -> None:
    """Every built-in tool spec has a real description and describes each argument."""
    specs = {t.name: t.spec() for t in builtin_tools()}
    assert specs["calculator"].parameters["required"] == ["expression"]
    assert set(specs["convert_units"].parameters["required"]) == {
        "value",
        "from_unit",
        "to_unit",
    }
    assert (
        specs["current_time"].parameters["properties"]["timezone"]["default"] == "UTC"
    )
    for spec in specs.values():
        assert len(spec.description) > 40
        for prop in spec.parameters["properties"].values():
            assert prop["description"]


# --- calculator ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2+2*3", 8),
        ("(2+2)*3", 12),
        ("10 - 4 - 3", 3),
        ("2**3**2", 512),
        ("7 / 2", 3.5),
        ("8 / 2", 4),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("-3 + +5", 2),
        ("-(2 + 3)", -5),
        ("2^10", 1024),
        ("3 × 4 ÷ 6", 2),  # noqa: RUF001
        ("0.1 + 0.2", 0.3),
        ("1.5e3", 1500),
        ("2 ** -1", 0.5),
        ("sqrt(16) + 1", 5),
        ("sqrt(2)", 1.4142135623731),
        ("abs(-4.5)", 4.5),
        ("round(2.567, 2)", 2.57),
        ("round(2.5)", 2),
        ("min(3, 1, 2)", 1),
        ("max(3, 1, 2)", 3),
        ("log(e)", 1),
        ("log(8, 2)", 3),
        ("log10(1000)", 3),
        ("exp(0)", 1),
        ("sin(0) + cos(0)", 1),
        ("tan(pi / 4)", 1),
        ("floor(2.7) + ceil(2.1)", 5),
        ("2 * pi", 6.28318530717959),
        ("2 + 2 =", 4),
        ("10 ** 100", 10**100),
    ],
)
async def test_calculator_evaluates(expression: str, expected: float) -> None:
    """The calculator gets each expression right and returns whole results as `int`."""
    result = await calc(expression)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    "expression", ["1 / 0", "1 // 0", "5 % 0", "0 ** -1", "1 / (2 - 2)"]
)
async def test_calculator_division_by_zero(expression: str) -> None:
    """Every form of dividing by zero fails with the message `division by zero`."""
    assert await calc_error(expression) == "division by zero"


async def test_calculator_refuses_import() -> None:
    """`__import__` is refused, and the message lists the allowed functions."""
    message = await calc_error("__import__('os')")
    assert message.startswith(
        "function '__import__' is not allowed; allowed functions:"
    )
    assert "sqrt" in message


@pytest.mark.parametrize(
    ("expression", "start"),
    [
        ("x + 1", "name 'x' is not allowed;"),
        ("os", "name 'os' is not allowed;"),
        ("(1).__class__", "attribute access ('.__class__') is not allowed;"),
        ("math.sqrt(4)", "attribute access ('.sqrt') is not allowed;"),
        ("'a' * 3", "strings are not allowed;"),
        ("print(1)", "function 'print' is not allowed;"),
        ("[1, 2]", "lists are not allowed;"),
        ("(1, 2)", "tuples are not allowed;"),
        ("1 < 2", "comparisons are not allowed;"),
        ("1 and 2", "boolean operators (and/or) are not allowed;"),
        ("[1][0]", "indexing are not allowed;"),
        ("lambda: 1", "lambda expressions are not allowed;"),
        ("1 << 2", "the operator << is not allowed;"),
        ("~1", "the operator ~ is not allowed;"),
        ("True + 1", "the constant True is not allowed;"),
        ("1j", "the constant 1j is not allowed;"),
        ("sqrt", "function 'sqrt' must be called, e.g. sqrt(2)"),
        ("round(2.5, ndigits=1)", "keyword arguments are not allowed in round()"),
        ("sqrt(1, 2)", "wrong number or kind of arguments for sqrt()"),
        ("sqrt(-1)", "sqrt() cannot take these arguments (math domain error)"),
        ("2 +", "invalid expression: invalid syntax"),
        ("", "empty expression;"),
    ],
)
async def test_calculator_rejects(expression: str, start: str) -> None:
    """Names, attributes, strings, containers and other unsafe syntax are refused."""
    assert (await calc_error(expression)).startswith(start)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("2 ** 100000", "exponent 100000 is too large (the limit is ±10000)"),
        ("2 ** -10001", "exponent -10001 is too large (the limit is ±10000)"),
        ("9 ** 9999", "the result is too large (the limit is about 1000 digits)"),
        (
            "(10 ** 600) * (10 ** 600)",
            "the result is too large (the limit is about 1000 digits)",
        ),
        ("10.0 ** 400", "the result is too large (the limit is about 1000 digits)"),
        ("1e999", "the result is too large (the limit is about 1000 digits)"),
        ("exp(1000)", "the result is too large (the limit is about 1000 digits)"),
        ("(-8) ** 0.5", "the result is not a real number"),
        ("round(5, -1000)", "round() digits must be an integer within ±100"),
    ],
)
async def test_calculator_bounds_sizes(expression: str, message: str) -> None:
    """Huge exponents, results or round digits, and complex roots fail with a reason."""
    assert await calc_error(expression) == message


async def test_calculator_bounds_length_and_nesting() -> None:
    """Expressions over 500 characters or nested too deeply are refused; 499 work."""
    assert await calc_error("1+" * 250 + "1") == (
        "expression is too long (501 characters; the limit is 500)"
    )
    assert await calc("1+" * 249 + "1") == 250
    assert await calc_error("-" * 499 + "1") == "expression is too deeply nested"
    assert (await calc_error("(" * 240 + "1" + ")" * 240)).startswith(
        "invalid expression"
    )


# --- current_time ----------------------------------------------------------------


async def test_current_time_defaults_to_utc() -> None:
    """Without a timezone, `current_time` reports the clock's instant in UTC."""
    assert await run("current_time") == {
        "timezone": "UTC",
        "iso": "2026-11-22T13:05:42+00:00",
        "date": "2026-11-22",
        "time": "13:05",
        "weekday": "Sunday",
    }


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        (
            "Europe/Paris",
            {
                "timezone": "Europe/Paris",
                "iso": "2026-11-22T14:05:42+01:00",
                "date": "2026-11-22",
                "time": "14:05",
                "weekday": "Sunday",
            },
        ),
        (
            "Asia/Tokyo",
            {
                "timezone": "Asia/Tokyo",
                "iso": "2026-11-22T22:05:42+09:00",
                "date": "2026-11-22",
                "time": "22:05",
                "weekday": "Sunday",
            },
        ),
        (
            "america/los_angeles",
            {
                "timezone": "America/Los_Angeles",
                "iso": "2026-11-22T05:05:42-08:00",
                "date": "2026-11-22",
                "time": "05:05",
                "weekday": "Sunday",
            },
        ),
        (
            "Pacific/Auckland",
            {
                "timezone": "Pacific/Auckland",
                "iso": "2026-11-23T02:05:42+13:00",
                "date": "2026-11-23",
                "time": "02:05",
                "weekday": "Monday",
            },
        ),
        (
            " utc ",
            {
                "timezone": "UTC",
                "iso": "2026-11-22T13:05:42+00:00",
                "date": "2026-11-22",
                "time": "13:05",
                "weekday": "Sunday",
            },
        ),
    ],
)
async def test_current_time_in_zones(zone: str, expected: dict[str, str]) -> None:
    """`current_time` converts to any IANA zone, ignoring case and outer spaces."""
    assert await run("current_time", timezone=zone) == expected


async def test_current_time_reads_the_clock_each_call() -> None:
    """`current_time` reads the clock afresh on every call rather than once."""
    instants = iter([FIXED, datetime(2027, 1, 1, 0, 0, tzinfo=UTC)])
    tool = {t.name: t for t in builtin_tools(clock=lambda: next(instants))}[
        "current_time"
    ]
    first = await tool(tool.args_model(), CTX)
    second = await tool(tool.args_model(), CTX)
    assert (first["date"], second["date"]) == ("2026-11-22", "2027-01-01")
    assert second["weekday"] == "Friday"


async def test_current_time_takes_a_naive_clock_as_utc() -> None:
    """A clock that returns a naive datetime is taken to be in UTC."""
    tool = builtin_tools(clock=lambda: datetime(2026, 11, 22, 13, 5))[1]
    result = await tool(tool.args_model(timezone="Europe/Berlin"), CTX)
    assert result["iso"] == "2026-11-22T14:05:00+01:00"


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus", "Narnia", "", "../etc/passwd", "Europe"]
)
async def test_current_time_unknown_zone(zone: str) -> None:
    """An unknown or malformed timezone is refused with a hint to use an IANA name."""
    with pytest.raises(ToolError) as caught:
        await run("current_time", timezone=zone)
    assert str(caught.value) == (
        f"unknown timezone '{zone}'; use an IANA name like 'Europe/Paris'"
    )


# --- convert_units ----------------------------------------------------------------


async def convert(value: float, source: str, target: str) -> dict[str, Any]:
    result: dict[str, Any] = await run(
        "convert_units", value=value, from_unit=source, to_unit=target
    )
    return result


async def test_convert_miles_to_km() -> None:
    """Ten miles convert to 16.0934 km, with the units reported as their symbols."""
    assert await convert(10, "miles", "km") == {
        "value": 10.0,
        "from_unit": "mi",
        "to_unit": "km",
        "result": 16.0934,
        "quantity": "length",
    }


@pytest.mark.parametrize(
    ("value", "source", "target", "result", "symbols", "quantity"),
    [
        (1, "Kilometres", "metres", 1000.0, ("km", "m"), "length"),
        (12, "inches", "ft", 1.0, ("in", "ft"), "length"),
        (3, "feet", "cm", 91.44, ("ft", "cm"), "length"),
        (100, "yards", "m", 91.44, ("yd", "m"), "length"),
        (1, "MILE", "kilometers", 1.60934, ("mi", "km"), "length"),
        (5, "lbs", "kg", 2.26796, ("lb", "kg"), "mass"),
        (1, "kilogram", "pounds", 2.20462, ("kg", "lb"), "mass"),
        (16, "ounces", "lb", 1.0, ("oz", "lb"), "mass"),
        (2.5, "t", "kg", 2500.0, ("t", "kg"), "mass"),
        (500, "mg", "g", 0.5, ("mg", "g"), "mass"),
        (1, "gallon", "liters", 3.78541, ("gal", "l"), "volume"),
        (2, "cups", "ml", 473.176, ("cup", "ml"), "volume"),
        (8, "fl oz", "cup", 1.0, ("fl oz", "cup"), "volume"),
        (1, "L", "mL", 1000.0, ("l", "ml"), "volume"),
        (100, "km/h", "mph", 62.1371, ("km/h", "mph"), "speed"),
        (10, "m/s", "km/h", 36.0, ("m/s", "km/h"), "speed"),
        (20, "knots", "km/h", 37.04, ("kn", "km/h"), "speed"),
        (60, "miles per hour", "kph", 96.5606, ("mph", "km/h"), "speed"),
    ],
)
async def test_convert_units(
    value: float,
    source: str,
    target: str,
    result: float,
    symbols: tuple[str, str],
    quantity: str,
) -> None:
    """Lengths, masses, volumes and speeds convert correctly from many spellings."""
    assert await convert(value, source, target) == {
        "value": float(value),
        "from_unit": symbols[0],
        "to_unit": symbols[1],
        "result": result,
        "quantity": quantity,
    }


@pytest.mark.parametrize(
    ("value", "source", "target", "result", "symbols"),
    [
        (100, "°C", "F", 212.0, ("°C", "°F")),
        (32, "fahrenheit", "celsius", 0.0, ("°F", "°C")),
        (-40, "C", "°F", -40.0, ("°C", "°F")),
        (0, "degrees Celsius", "kelvin", 273.15, ("°C", "K")),
        (98.6, "°f", "c", 37.0, ("°F", "°C")),
        (0, "K", "C", -273.15, ("K", "°C")),
        (10, "\N{DEGREE CELSIUS}", "\N{DEGREE FAHRENHEIT}", 50.0, ("°C", "°F")),
    ],
)
async def test_convert_temperature(
    value: float, source: str, target: str, result: float, symbols: tuple[str, str]
) -> None:
    """Temperatures convert correctly among °C, °F and K from any common spelling."""
    converted = await convert(value, source, target)
    assert (converted["from_unit"], converted["to_unit"]) == symbols
    assert converted["result"] == result
    assert converted["quantity"] == "temperature"


async def test_convert_below_absolute_zero() -> None:
    """A temperature below absolute zero is refused instead of converted."""
    with pytest.raises(ToolError) as caught:
        await convert(-500, "celsius", "F")
    assert str(caught.value) == "-500 °C is below absolute zero"


async def test_convert_incompatible_units() -> None:
    """Converting across quantities is refused, listing the source quantity's units."""
    with pytest.raises(ToolError) as caught:
        await convert(5, "kg", "km")
    assert str(caught.value) == (
        "cannot convert mass (kg) to length (km); "
        "supported mass units: mg, g, kg, oz, lb, t"
    )


async def test_convert_unknown_target_lists_the_quantity() -> None:
    """An unknown target unit is refused with the units of the source's quantity."""
    with pytest.raises(ToolError) as caught:
        await convert(10, "miles", "furlongs")
    assert str(caught.value) == (
        "unknown unit 'furlongs'; supported length units: mm, cm, m, km, in, ft, yd, mi"
    )


async def test_convert_unknown_source_lists_everything() -> None:
    """An unknown source unit is refused with every supported unit, by quantity."""
    with pytest.raises(ToolError) as caught:
        await convert(1, "smoots", "parsecs")
    assert str(caught.value) == (
        "unknown unit 'smoots'; supported units: "
        "length (mm, cm, m, km, in, ft, yd, mi); mass (mg, g, kg, oz, lb, t); "
        "volume (ml, l, gal, cup, fl oz); temperature (°C, °F, K); "
        "speed (km/h, mph, m/s, kn)"
    )


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_convert_rejects_non_finite_values(value: float) -> None:
    """Infinite or NaN values fail argument validation before any conversion."""
    model: type[BaseModel] = tools()["convert_units"].args_model
    with pytest.raises(ValidationError):
        model(value=value, from_unit="m", to_unit="km")
