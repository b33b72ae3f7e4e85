"""Units of measure: names people use, and conversions between them.

Every unit has a canonical symbol, a quantity and a linear map to the
quantity's base unit (metre, kilogram, litre, kelvin, metre per second):
`base = (value + offset) * factor`. Names are matched case-insensitively,
with or without a degree sign, in the singular or the plural.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from backend.errors import ToolError
from backend.tools.arithmetic import format_number

SIGNIFICANT_DIGITS = 6


@dataclass(frozen=True, slots=True)
class Unit:
    symbol: str
    quantity: str
    factor: float
    offset: float = 0.0

    def to_base(self, value: float) -> float:
        return (value + self.offset) * self.factor

    def from_base(self, base: float) -> float:
        return base / self.factor - self.offset


_FAHRENHEIT = 5 / 9

# (unit, other names besides the symbol)
_TABLE: tuple[tuple[Unit, tuple[str, ...]], ...] = (
    (Unit("mm", "length", 0.001), ("millimeter", "millimetre")),
    (Unit("cm", "length", 0.01), ("centimeter", "centimetre")),
    (Unit("m", "length", 1.0), ("meter", "metre")),
    (Unit("km", "length", 1000.0), ("kilometer", "kilometre", "kms")),
    (Unit("in", "length", 0.0254), ("inch", "inches", '"')),
    (Unit("ft", "length", 0.3048), ("foot", "feet", "'")),
    (Unit("yd", "length", 0.9144), ("yard",)),
    (Unit("mi", "length", 1609.344), ("mile",)),
    (Unit("mg", "mass", 1e-6), ("milligram", "milligramme")),
    (Unit("g", "mass", 0.001), ("gram", "gramme")),
    (Unit("kg", "mass", 1.0), ("kilogram", "kilogramme", "kilo")),
    (Unit("oz", "mass", 0.028349523125), ("ounce",)),
    (Unit("lb", "mass", 0.45359237), ("pound",)),
    (Unit("t", "mass", 1000.0), ("tonne", "metric ton")),
    (Unit("ml", "volume", 0.001), ("milliliter", "millilitre")),
    (Unit("l", "volume", 1.0), ("liter", "litre")),
    (Unit("gal", "volume", 3.785411784), ("gallon", "us gallon")),
    (Unit("cup", "volume", 0.2365882365), ("us cup",)),
    (
        Unit("fl oz", "volume", 0.0295735295625),
        ("floz", "fl. oz", "fl.oz", "fluid ounce", "us fluid ounce"),
    ),
    (Unit("°C", "temperature", 1.0, 273.15), ("celsius", "centigrade", "degc")),
    (Unit("°F", "temperature", _FAHRENHEIT, 459.67), ("fahrenheit", "degf")),
    (Unit("K", "temperature", 1.0), ("kelvin",)),
    (
        Unit("km/h", "speed", 1 / 3.6),
        (
            "kmh",
            "kph",
            "kmph",
            "km/hr",
            "km per hour",
            "kilometer per hour",
            "kilometre per hour",
        ),
    ),
    (Unit("mph", "speed", 0.44704), ("mi/h", "mile per hour")),
    (
        Unit("m/s", "speed", 1.0),
        ("m/sec", "meter per second", "metre per second", "m per s"),
    ),
    (Unit("kn", "speed", 1852 / 3600), ("kt", "kts", "knot")),
)

QUANTITIES: tuple[str, ...] = ("length", "mass", "volume", "temperature", "speed")


def _key(name: str) -> str:
    text = name.strip().lower().replace("\N{DEGREE CELSIUS}", "c")
    text = (
        text.replace("\N{DEGREE FAHRENHEIT}", "f").replace("º", " ").replace("°", " ")
    )
    text = re.sub(r"\s+", " ", text).strip(" .,;:!?")
    return re.sub(r"^(?:degrees?|deg)\s+", "", text)


def _aliases() -> dict[str, Unit]:
    table: dict[str, Unit] = {}
    for unit, names in _TABLE:
        for name in (unit.symbol, *names):
            table[_key(name)] = unit
    return table


_ALIASES = _aliases()


def _singular(key: str) -> str:
    words = key.split(" ")
    return " ".join(w[:-1] if len(w) > 2 and w.endswith("s") else w for w in words)


def lookup_unit(name: str) -> Unit | None:
    """The unit called `name` ("miles", "°C", "km/h", …), or None."""
    key = _key(name)
    return _ALIASES.get(key) or _ALIASES.get(_singular(key))


def symbols(quantity: str) -> list[str]:
    """The canonical symbols of every unit of `quantity`, in table order."""
    return [unit.symbol for unit, _ in _TABLE if unit.quantity == quantity]


def supported(quantity: str | None = None) -> str:
    """What can be converted, for error messages."""
    if quantity is not None:
        return f"supported {quantity} units: {', '.join(symbols(quantity))}"
    groups = (f"{q} ({', '.join(symbols(q))})" for q in QUANTITIES)
    return "supported units: " + "; ".join(groups)


def round_significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{digits}g}") + 0.0


def convert(value: float, from_unit: str, to_unit: str) -> dict[str, Any]:
    """Convert `value` and describe the conversion with canonical symbols."""
    source, target = _resolve(from_unit, to_unit)
    if source.quantity != target.quantity:
        raise ToolError(
            f"cannot convert {source.quantity} ({source.symbol}) to "
            f"{target.quantity} ({target.symbol}); {supported(source.quantity)}"
        )
    base = source.to_base(value)
    if source.quantity == "temperature" and base < -1e-9:
        raise ToolError(
            f"{format_number(value)} {source.symbol} is below absolute zero"
        )
    result = target.from_base(base)
    if source.offset or target.offset:
        result = round(result, 9)  # offsets leave absolute noise: 32 °F -> 5.7e-14 °C
    if not math.isfinite(result):
        raise ToolError("the value is too large to convert")
    return {
        "value": value,
        "from_unit": source.symbol,
        "to_unit": target.symbol,
        "result": round_significant(result),
        "quantity": source.quantity,
    }


def _resolve(from_unit: str, to_unit: str) -> tuple[Unit, Unit]:
    source, target = lookup_unit(from_unit), lookup_unit(to_unit)
    if source is None:
        hint = supported(target.quantity if target else None)
        raise ToolError(f"unknown unit '{from_unit}'; {hint}")
    if target is None:
        raise ToolError(f"unknown unit '{to_unit}'; {supported(source.quantity)}")
    return source, target
