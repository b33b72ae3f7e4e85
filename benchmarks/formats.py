"""How the report writes a figure: one function per unit."""

from __future__ import annotations


def ms(value: float) -> str:
    return f"{value:.3f} ms" if value < 1 else f"{value:.2f} ms"


def times(value: float) -> str:
    return f"{value:.2f}x"


def pct(value: float) -> str:
    return f"{value:.0f} %"


def kib(value: float) -> str:
    return f"{value:.1f} KiB"


def mb(value: float) -> str:
    return f"{value:.1f} MB"


def us(value: float) -> str:
    return f"{value:.1f} µs"


def rate(value: float) -> str:
    return f"{value:,.0f}/s"


def secs(value: float) -> str:
    return f"{value:.2f} s"


def count(value: float) -> str:
    """A count that may be a median between two (`12.5`)."""
    return f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"


def n(value: int) -> str:
    return f"{value:,}"


def duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"
