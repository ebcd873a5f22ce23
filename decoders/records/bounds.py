"""The range each number of a saved run can take, declared once and checked by msgspec when a run
is read (never when one is made: a run the tool decodes is what it measured).

Every figure is measured or counted, so each has a bound. A hand-edited or crafted file's 1e308,
5e-324 or 10**400 would otherwise overflow to infinity or NaN in the arithmetic that shows it
("infx slower", "nanx slower", a crash in the plot or the acceptance bars), far from the file.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import msgspec

MAX_MS = 1e10  # milliseconds in one phase of a run: 115 days
MAX_COUNT = 2**40  # tokens, positions, forwards, iteration indexes
MAX_TOKEN_ID = 2**31 - 1  # a vocabulary's ids
MIN_RATIO, MAX_RATIO = 1e-6, 1e6  # a speedup, drift or cost in one-token forwards
MAX_FIGURE = 1e12  # any other figure a method adds (a method's extras, read as plain JSON)

Prob = Annotated[float, msgspec.Meta(ge=0.0, le=1.001)]  # a probability, rounding allowed for
Ms = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_MS)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
TokenId = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKEN_ID)]
#: A ratio of two speeds or step times: one of 0 cannot have been measured (and every "x faster /
#: x slower" divides by it), nor can one of 1e-300.
Ratio = Annotated[float, msgspec.Meta(ge=MIN_RATIO, le=MAX_RATIO)]
#: A spread, tokens per forward, an acceptance length, a cost: not negative, not astronomical.
Positive = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_RATIO)]


def unbounded_figure(value: Any, at: str) -> str | None:
    """Where in ``value`` (plain JSON: a method's own figures) a number lies outside
    ±`MAX_FIGURE`, or is a float too small to divide by (0 < |x| < 1e-12), or None."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    if isinstance(value, int):
        return None if abs(value) <= MAX_FIGURE else f"{at} is {str(value)[:20]}…, past ±{MAX_FIGURE:g}"
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_FIGURE or 0 < abs(value) < 1 / MAX_FIGURE:
            return f"{at} is {value!r}, outside the ±{MAX_FIGURE:g} a figure can take (or 0)"
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = unbounded_figure(item, f"{at}.{key}" if isinstance(key, str) else f"{at}[{key}]")
        if found:
            return found
    return None
