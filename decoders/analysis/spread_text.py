"""A speedup and its spread in text, at the precision the spread needs.

At two decimals a spread below 0.005 printed as "+/- 0.00", which reads as "no uncertainty at
all" (and makes any difference look significant). A spread that small gets a third decimal, and
the speedup beside it the same; one below 0.0005 reads "< 0.001". No torch, no Textual: the app,
the headless command line and the bench may all print with it.
"""

from __future__ import annotations

import math

#: The smallest spread that shows at two decimals ("0.01"); below it, three.
TWO_PLACES_FROM = 0.005
#: The smallest spread that shows at three decimals ("0.001"); below it, "< 0.001".
THREE_PLACES_FROM = 0.0005


def spread_places(spread: float | None) -> int:
    """Decimal places a speedup and its ``spread`` print with: 2, or 3 for a spread that would
    print as 0.00 (None, NaN, infinity: 2)."""
    if spread is None or not math.isfinite(spread) or abs(spread) >= TWO_PLACES_FROM:
        return 2
    return 3


def spread_number(spread: float) -> str:
    """The spread alone: "0.04", "0.004", "< 0.001"."""
    if math.isfinite(spread) and abs(spread) < THREE_PLACES_FROM:
        return "< 0.001"
    return f"{spread:.{spread_places(spread)}f}"


def value_with_spread(value: float, spread: float | None, suffix: str = "x", sign: str = "+/-") -> str:
    """``value`` and its ``spread`` at the precision the spread needs: "1.35x +/- 0.04",
    "1.003x +/- 0.004", "1.000x +/- < 0.001"; just the value when there is no spread."""
    places = spread_places(spread)
    text = f"{value:.{places}f}{suffix}"
    if spread is None or not math.isfinite(spread):
        return text
    return f"{text} {sign} {spread_number(spread)}"
