"""Spreads that cover a second measurement: the machine's run-to-run noise, calibrated.

A run's own spread (`decoders.analysis.timing.paired_speedup`) is two standard errors of its
step-to-step jitter: what the same steps would give again within the run. A second run of the
same settings lands further off than that: the machine's state differs from run to run (caches,
frequency, other processes) in ways a run's own steps cannot see. Measured here (2-core AMD EPYC,
AVX-512, one thread, another job on the other core): prompt lookup on one setting read 1.31x
+/- 0.16 live and 1.03x headless; autoregressive decoding against itself 1.03x +/- 0.04 headless.

The calibration runs autoregressive decoding against its own interleaved baseline a few times
(the true speedup is exactly 1) and keeps, per machine, the relative run-to-run deviation its
steps do not explain (`noise`). Every speedup's spread is then widened to cover a second
measurement of the same settings (`widen`): two standard errors of the difference between two
runs, each with its own step jitter and the machine's run-to-run noise. The same spread sets the
threshold for "no measurable difference" (`decoders.analysis.timing.verdict`).
"""

from __future__ import annotations

import math
from typing import Sequence

import msgspec

#: Runs a calibration takes by default, and the most it takes.
RUNS = 6
MAX_RUNS = 20
#: Tokens each calibration run decodes (the most a user can ask for: `MAX_TOKENS`).
TOKENS = 32
MAX_TOKENS = 256


class Calibration(msgspec.Struct, kw_only=True):
    """One machine's run-to-run noise, measured by autoregressive decoding against itself."""

    key: str  # the machine, model and settings it holds for (`decoders.models.machine.machine_key`)
    machine: dict[str, str]  # what the key is made of, readable
    measured: str  # when (ISO 8601, UTC)
    runs: list[float]  # each run's decode speedup (autoregressive against itself: truly 1.0)
    step_spreads: list[float]  # each run's own spread (two standard errors of its step jitter)
    tokens: int
    prompt_tokens: int
    noise: float  # relative run-to-run deviation beyond step jitter (one standard deviation)

    def step_floor(self, tokens: int) -> float:
        """The narrowest step spread a run of ``tokens`` decoded tokens is credited with: the
        calibration runs' median step spread, scaled as a standard error by the square root of
        their tokens over the run's. A run's own step spread is an estimate from a few dozen
        steps: on one machine and one setting it ranged from 0.006 to 0.06 from one run to the
        next (2026-12-05, AVX-512, 48 tokens) while the runs' distance from the truth did not
        follow it, so a run whose steps happened to agree closely was given a spread that a
        second run fell outside (0.956x +/- 0.023 for autoregressive decoding against itself)."""
        spreads = sorted(s for s in self.step_spreads if math.isfinite(s) and s > 0)
        if not spreads or tokens <= 0:
            return 0.0
        return spreads[len(spreads) // 2] * math.sqrt(self.tokens / tokens)

    def as_dict(self) -> dict:
        """What a run's summary keeps of the calibration that widened its spread."""
        return {"measured": self.measured, "noise": round(self.noise, 4), "runs": len(self.runs)}


def run_noise(speedups: Sequence[float], step_spreads: Sequence[float]) -> float:
    """The relative run-to-run deviation of autoregressive decoding against itself that the runs'
    own step jitter does not explain: the maximum-likelihood ``n`` of log(speedup_i) ~ N(0,
    se_i^2 + n^2), se_i half of run i's step spread (its truth is 0, so a bias counts as noise
    too). Where every run's step spread is the same it is the root mean square of log(speedup)
    less that step variance, floored at 0; where they differ, a run whose steps agreed closely and
    still landed far off weighs as it should (the moments' estimate let a few jittery runs hide
    it: 0.75% against 1.47% on six runs measured 2026-12-05)."""
    pairs = [(math.log(s), (w / 2) ** 2 if math.isfinite(w) else 0.0)
             for s, w in zip(speedups, step_spreads, strict=False) if s > 0 and math.isfinite(s)]
    if len(pairs) < 2:
        raise ValueError("a calibration needs at least two runs with a speedup")

    def likelihood(n2: float) -> float:
        return -sum(math.log(v + n2) + x * x / (v + n2) for x, v in pairs if v + n2 > 0)

    top = max(x * x for x, _ in pairs)
    if top == 0.0:
        return 0.0
    # The maximum lies in [0, max x^2] (above it every term falls); a fine grid, then a bisection
    # of the derivative's sign around the grid's best point.
    grid = [top * i / 2000 for i in range(2001)]
    best = max(range(len(grid)), key=lambda i: likelihood(grid[i]))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, 2000)]
    for _ in range(60):
        a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if likelihood(a) < likelihood(b):
            lo = a
        else:
            hi = b
    return math.sqrt((lo + hi) / 2)


def widen(speedup: float, step_spread: float | None, noise: float, floor: float = 0.0) -> float | None:
    """The spread that covers a second measurement of the same settings: two standard errors of
    the difference of two runs, each carrying its step jitter (half of ``step_spread``, which is
    two standard errors, taken as at least ``floor``: `Calibration.step_floor`) and the machine's
    run-to-run ``noise`` (relative). None when the run measured no spread of its own."""
    if step_spread is None or not math.isfinite(step_spread) or not math.isfinite(speedup):
        return None
    one = (max(step_spread, floor) / 2) ** 2 + (noise * speedup) ** 2
    return 2 * math.sqrt(2 * one)


def encode(calibrations: dict[str, Calibration]) -> bytes:
    return msgspec.json.format(msgspec.json.encode(calibrations), indent=1)


def decode(data: bytes) -> dict[str, Calibration]:
    """The calibrations in a file; msgspec.ValidationError or DecodeError when it is not one."""
    return msgspec.json.decode(data, type=dict[str, Calibration])
