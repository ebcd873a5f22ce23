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

    def as_dict(self) -> dict:
        """What a run's summary keeps of the calibration that widened its spread."""
        return {"measured": self.measured, "noise": round(self.noise, 4), "runs": len(self.runs)}


def run_noise(speedups: Sequence[float], step_spreads: Sequence[float]) -> float:
    """The relative run-to-run deviation of autoregressive decoding against itself that the runs'
    own step jitter does not explain: the root mean square of log(speedup) (its truth is 0, so a
    bias counts as noise too), less the runs' mean step variance, floored at 0."""
    logs = [math.log(s) for s in speedups if s > 0 and math.isfinite(s)]
    if len(logs) < 2:
        raise ValueError("a calibration needs at least two runs with a speedup")
    total = sum(x * x for x in logs) / len(logs)
    steps = [(s / 2) ** 2 for s in step_spreads if math.isfinite(s)]
    within = sum(steps) / len(steps) if steps else 0.0
    return math.sqrt(max(total - within, 0.0))


def widen(speedup: float, step_spread: float | None, noise: float) -> float | None:
    """The spread that covers a second measurement of the same settings: two standard errors of
    the difference of two runs, each carrying its step jitter (half of ``step_spread``, which is
    two standard errors) and the machine's run-to-run ``noise`` (relative). None when the run
    measured no spread of its own."""
    if step_spread is None or not math.isfinite(step_spread) or not math.isfinite(speedup):
        return None
    one = (step_spread / 2) ** 2 + (noise * speedup) ** 2
    return 2 * math.sqrt(2 * one)


def encode(calibrations: dict[str, Calibration]) -> bytes:
    return msgspec.json.format(msgspec.json.encode(calibrations), indent=1)


def decode(data: bytes) -> dict[str, Calibration]:
    """The calibrations in a file; msgspec.ValidationError or DecodeError when it is not one."""
    return msgspec.json.decode(data, type=dict[str, Calibration])
