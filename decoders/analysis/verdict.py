"""The headline a run is judged by and its verdict, derived once: the statistics pane, the status
line, the history, the sweep, the exports and the sentence under the figures all take them from
`headline`, so that no surface can call faster what another calls noise.

The verdict is "faster" or "slower" beyond the spread (two standard errors) and beyond
``threshold``, a difference the machine's own run-to-run variation can make (a calibration's;
0 without one); "even" (no measurable difference) inside either; "unknown" when no spread was
measured (a saved run from before the spread), and "withheld" where a sequential pairing's drift
is too large to say (`withheld`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from decoders.records.summary import Summary

Verdict = Literal["faster", "slower", "even", "unknown", "withheld"]

#: A sequential pairing whose drift moved the machine's step time more than this share cannot say
#: whether the change happened before the run or inside it: its verdict is withheld.
DRIFT_WITHHELD = 0.2


def verdict(speedup: float, spread: float | None, threshold: float = 0.0) -> Verdict:
    """"faster" or "slower" when the speedup is beyond its spread and beyond ``threshold``, "even"
    inside either, and "unknown" when no spread was measured (and the speedup is beyond the
    threshold) or the figures are not numbers (NaN, infinity): colour only what is measured."""
    if not math.isfinite(speedup) or not math.isfinite(threshold):
        return "unknown"
    if threshold > 0 and abs(speedup - 1.0) <= threshold:
        return "even"
    if spread is None or not math.isfinite(spread):
        return "unknown"
    if abs(speedup - 1.0) <= spread:
        return "even"
    return "faster" if speedup > 1.0 else "slower"


def withheld(s: Summary) -> bool:
    """A sequential pairing whose drift is too large to trust a verdict from: read from the probe
    after the run (not from the run's own steps), it cannot say when the machine changed."""
    return (s.pairing == "sequential" and s.drift is not None and not s.drift_own_steps
            and abs(s.drift - 1) > DRIFT_WITHHELD)


@dataclass(frozen=True)
class Headline:
    """The speedup a run is judged by, its spread and its verdict. ``decode``: the decode speedup
    (the prefill apart, shown as "decode speedup"), else the end-to-end one (too few tokens for a
    decode rate: shown as "speedup", with the end-to-end spread)."""

    speedup: float | None
    spread: float | None
    verdict: Verdict
    decode: bool
    threshold: float = 0.0


def headline(s: Summary, threshold: float = 0.0) -> Headline:
    """``s``'s headline: the decode speedup with its spread where measured, else the end-to-end
    speedup with its own spread (the decode one where that was not measured)."""
    speed: float | None
    if s.speedup_decode is not None:
        speed, spread, decode = s.speedup_decode, s.speedup_spread, True
    else:
        speed, decode = s.speedup_wall, False
        spread = s.speedup_wall_spread if s.speedup_wall_spread is not None else s.speedup_spread
    if speed is None:
        return Headline(None, spread, "unknown", decode, threshold)
    v: Verdict = "withheld" if withheld(s) else verdict(speed, spread, threshold)
    return Headline(speed, spread, v, decode, threshold)


def reads_faster(h: Headline) -> bool:
    """What the headline's words say, colour apart: a speedup with no spread measured reads as its
    direction ("1.05x faster; spread not measured")."""
    return h.verdict == "faster" or (h.verdict == "unknown" and h.speedup is not None and h.speedup >= 1.0)


def ratio_text(speedup: float, spread: float | None, than: str = "autoregressive",
               v: Verdict | None = None) -> str:
    """"1.35x faster than autoregressive (+/- 0.04)", "3.12x slower than ... (0.32x +/- 0.01)" (the
    spread belongs to the speedup, so a slowdown shows both), "no measurable difference from ...
    (0.98x +/- 0.03)" for the verdict "even" (``v``, else the speedup's own at threshold 0), "... (spread
    not measured)" for "unknown"; "speedup n/a" when it is not a positive number (NaN, infinity:
    nothing was measured)."""
    if not (math.isfinite(speedup) and speedup > 0):
        return f"speedup over {than} n/a"
    if spread is not None and not math.isfinite(spread):
        spread = None
    if v is None:
        v = verdict(speedup, spread)
    if v == "even":
        return f"no measurable difference from {than} ({speedup:.2f}x" + (
            f" +/- {spread:.2f})" if spread is not None else ")")
    noise = f" +/- {spread:.2f}" if spread else ""
    if v == "unknown" and spread is None:
        noise = "; spread not measured"
    if speedup >= 1.0:
        return f"{speedup:.2f}x faster than {than}" + (f" ({noise.lstrip('; ').lstrip()})" if noise else "")
    # the spread is of the speedup itself: shown beside it, not beside its inverse
    return f"{1.0 / speedup:.2f}x slower than {than} ({speedup:.2f}x{noise})"
