"""The built-in tools: calculator, current_time, convert_units.

All three are read-only and idempotent, and each teaches the offline model
its use (`*_skill.py`). `builtin_tools()` returns fresh `Tool` objects; pass
a `clock` to pin `current_time` in tests.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import BaseModel, Field

from backend.errors import ToolError
from backend.tools.arithmetic import evaluate
from backend.tools.base import Tool, ToolContext, ToolEffect
from backend.tools.calculator_skill import CalculatorSkill
from backend.tools.time_skill import TimeSkill
from backend.tools.units import convert
from backend.tools.units_skill import UnitsSkill

Clock = Callable[[], datetime]
"""Returns the current instant, timezone-aware (naive values are taken as UTC)."""

WEEKDAYS = (
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
)

_EFFECT = ToolEffect(read_only=True, idempotent=True, untrusted_result=False)


def utc_now() -> datetime:
    return datetime.now(UTC)


class CalculatorArgs(BaseModel):
    expression: str = Field(
        description=(
            "The arithmetic expression to evaluate, e.g. '2 + 2 * 3', "
            "'(4 + 5) / 3', 'sqrt(16) + 1' or '2^10'."
        )
    )


class CurrentTimeArgs(BaseModel):
    timezone: str = Field(
        default="UTC",
        description="An IANA timezone name, e.g. 'Europe/Paris', 'Asia/Tokyo', 'UTC'.",
    )


class ConvertUnitsArgs(BaseModel):
    value: float = Field(
        description="The amount to convert, e.g. 10.", allow_inf_nan=False
    )
    from_unit: str = Field(
        description="The unit of `value`, e.g. 'mi', 'miles', 'kg', '°C', 'km/h'."
    )
    to_unit: str = Field(
        description="The unit to convert to; must measure the same quantity."
    )


CALCULATOR_DESCRIPTION = (
    "Evaluate an arithmetic expression exactly. Supports numbers, + - * / // % "
    "and ** (or ^), parentheses, the functions sqrt, abs, round, min, max, log, "
    "log10, exp, sin, cos, tan, floor, ceil, and the constants pi and e. "
    "Returns the expression and its result."
)
CURRENT_TIME_DESCRIPTION = (
    "Get the current date and time in a timezone (IANA name such as "
    "'Europe/Paris'; default UTC). Returns ISO timestamp, date, HH:MM time "
    "and weekday."
)
CONVERT_UNITS_DESCRIPTION = (
    "Convert a value between units of the same quantity: length (mm, cm, m, km, "
    "in, ft, yd, mi), mass (mg, g, kg, oz, lb, t), volume (ml, l, gal, cup, "
    "fl oz; US measures), temperature (°C, °F, K) and speed (km/h, mph, m/s, kn). "
    "Common names and plurals such as 'miles' or 'celsius' are accepted."
)


async def calculator(args: CalculatorArgs, ctx: ToolContext) -> dict[str, Any]:
    return {"expression": args.expression, "result": evaluate(args.expression)}


async def convert_units(args: ConvertUnitsArgs, ctx: ToolContext) -> dict[str, Any]:
    return convert(args.value, args.from_unit, args.to_unit)


def current_time_tool(clock: Clock = utc_now) -> Tool[CurrentTimeArgs]:
    """The `current_time` tool reading the time from `clock`."""

    async def current_time(args: CurrentTimeArgs, ctx: ToolContext) -> dict[str, Any]:
        return describe_time(clock(), resolve_zone(args.timezone))

    return Tool(
        "current_time",
        CURRENT_TIME_DESCRIPTION,
        CurrentTimeArgs,
        current_time,
        _EFFECT,
        offline=TimeSkill(),
        summary="Tells the current date and time in a city or timezone.",
    )


def builtin_tools(clock: Clock = utc_now) -> list[Tool[Any]]:
    """Fresh built-in tools; `clock` feeds `current_time`."""
    return [
        Tool(
            "calculator",
            CALCULATOR_DESCRIPTION,
            CalculatorArgs,
            calculator,
            _EFFECT,
            offline=CalculatorSkill(),
            summary="Works out arithmetic exactly.",
        ),
        current_time_tool(clock),
        Tool(
            "convert_units",
            CONVERT_UNITS_DESCRIPTION,
            ConvertUnitsArgs,
            convert_units,
            _EFFECT,
            offline=UnitsSkill(),
            summary="Converts lengths, weights, temperatures, speeds and more.",
        ),
    ]


def resolve_zone(name: str) -> ZoneInfo:
    """The IANA zone `name` (case-insensitive), else a `ToolError`."""
    key = name.strip()
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass
    canonical = _zone_keys().get(key.lower())
    if canonical is not None:
        return ZoneInfo(canonical)
    raise ToolError(f"unknown timezone '{name}'; use an IANA name like 'Europe/Paris'")


def describe_time(instant: datetime, zone: ZoneInfo) -> dict[str, Any]:
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    local = instant.astimezone(zone)
    return {
        "timezone": zone.key,
        "iso": local.isoformat(timespec="seconds"),
        "date": local.date().isoformat(),
        "time": f"{local.hour:02d}:{local.minute:02d}",
        "weekday": WEEKDAYS[local.weekday()],
    }


@cache
def _zone_keys() -> dict[str, str]:
    keys = {key.lower(): key for key in sorted(available_timezones())}
    keys.setdefault("utc", "UTC")
    return keys
