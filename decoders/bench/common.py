"""What the benchmark's modules share: means and ratios that tolerate gaps, and flat records
whose JSON form is their fields."""

from __future__ import annotations

import statistics
from dataclasses import asdict, fields
from typing import Any, Iterable, TypeVar

from decoders.core.declarations import baseline_method

#: The method every speedup is measured against (the registry's baseline: autoregressive decoding).
BASELINE = baseline_method().name

R = TypeVar("R", bound="FlatRecord")


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values that are not None (None when there are none)."""
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing or b is zero."""
    return None if a is None or not b else a / b


def rounded(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def off_by(measured: float | None, predicted: float | None, digits: int = 4) -> float | None:
    """How far ``measured`` is from ``predicted`` as a fraction (0.1: 10% above)."""
    return rounded(measured / predicted - 1 if measured and predicted else None, digits)


class FlatRecord:
    """A dataclass whose JSON form is a dict of its fields (mixed into flat report records)."""

    @classmethod
    def from_json(cls: type[R], d: dict[str, Any]) -> R:
        """The record back from its JSON form; keys it does not have read as None."""
        return cls(**{f.name: d.get(f.name) for f in fields(cls)})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
