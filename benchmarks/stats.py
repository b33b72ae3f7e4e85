"""Median and p99 of a set of samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank `q`-th percentile (the max for q = 99 and < 100 samples)."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Summary:
    median: float
    p99: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary:
        return cls(
            median=statistics.median(samples),
            p99=percentile(samples, 99),
            low=min(samples),
            high=max(samples),
            count=len(samples),
        )

    def scaled(self, factor: float) -> Summary:
        return Summary(
            self.median * factor,
            self.p99 * factor,
            self.low * factor,
            self.high * factor,
            self.count,
        )
