"""Speedups a user can act on: rates compared phase by phase, over the tokens both runs produced,
with the timing noise measured in the same run.

The baseline is decoded once per prompt and settings and reused, so by the time a method runs
the machine may be busier or quieter than when the baseline ran. The machine's speed now is
read from one-token target steps timed in the run itself: the method's own undrafted steps
(every step of autoregressive decoding) and a short burst of steps right after it (the probe).
Each is paired with the baseline's step at the same context (`paired_drift`): the mean ratio
(the drift) rescales the baseline to now, and its error with the baseline's step noise gives
every speedup its spread (two standard errors, about 95%). A speedup inside its spread reads
"no measurable difference". The mean, not the median: a rate is a sum of steps, so a machine
that turned busy for half of a run slows that run by the mean of its steps, and the spread of
the ratios says how far the machine moved while the run was being timed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from decoders.records.run import Run

PROBE_STEPS = 5  # one-token steps in the probe after each method run
CURVE_WIDTHS = 16  # the verify-cost curve T(k) is measured for k = 1..16
CURVE_REPEATS = 2
BASE_TAIL = 8  # the baseline's last one-token steps the probe is compared with


@dataclass(frozen=True)
class Drift:
    """How much slower (> 1) or faster the machine steps now than when the baseline ran."""

    factor: float
    rel_error: float  # one standard error of the factor, relative


def paired_drift(baseline: Run, method: Run, probe_ms: Sequence[float]) -> tuple[Drift, int]:
    """The drift from paired steps: each one-token target step of the method run (autoregressive
    decoding's every step, the undrafted steps of the others) over the baseline's step at the same
    output position, that is at the same context, and each probe step over one of the baseline's
    last steps. Pairing takes out what both runs share (the step time growing with the context),
    leaving the machine's change between then and now. A run with at least as many steps of its
    own as the probe has is read from those alone (they are the machine while the run was timed);
    otherwise from the probe alone (a few steps of its own, paired with the baseline's step where
    a method had just spent its draft, say little of the machine). Returns the drift and how many
    of its pairs are the method's own steps."""
    base = {it.pos: it.t_verify_ms for it in baseline.iters[1:] if _plain(it)}
    ratios = [it.t_verify_ms / base[it.pos] for it in method.iters[1:] if _plain(it) and it.pos in base]
    own = len(ratios)
    tail = baseline_tail(baseline)
    probe = [now / tail[-1 - i % len(tail)] for i, now in enumerate(probe_ms) if now > 0] if tail else []
    if own < max(len(probe), 1):
        ratios = probe
    if not ratios:
        return Drift(1.0, 0.0), 0
    return Drift(statistics.fmean(ratios), rse(ratios)), own


def rse(samples: Sequence[float]) -> float:
    """Relative standard error of the mean of ``samples`` (0 for fewer than two)."""
    if len(samples) < 2:
        return 0.0
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean / len(samples) ** 0.5 if mean > 0 else 0.0


def one_token_steps(run: Run) -> list[float]:
    """Verify times of the run's one-token decode steps (the prefill left out)."""
    return [it.t_verify_ms for it in run.iters[1:] if _plain(it)]


def _plain(it) -> bool:
    """A one-token target step: nothing drafted, one token out, no method record (a lookahead
    iteration that verified no n-gram still ran its wide lookahead forward)."""
    return not it.draft and len(it.emit) == 1 and it.detail is None and it.t_verify_ms > 0


def baseline_tail(baseline: Run) -> list[float]:
    return one_token_steps(baseline)[-BASE_TAIL:]


def time_to(run: Run, tokens: int) -> float | None:
    """Milliseconds from the run's start until its first ``tokens`` tokens were out."""
    emitted = 0
    for it in run.iters:
        emitted += len(it.emit)
        if emitted >= tokens:
            return it.t_end_ms
    return None


def decode_rate(run: Run) -> tuple[float | None, int]:
    """(ms per token after the first iteration, tokens in that phase)."""
    if len(run.iters) < 2 or run.iters[0].t_end_ms is None or run.iters[-1].t_end_ms is None:
        return None, 0
    tokens = sum(len(it.emit) for it in run.iters[1:])
    ms = run.iters[-1].t_end_ms - run.iters[0].t_end_ms
    return (ms / tokens if tokens and ms > 0 else None), tokens


def verdict(speedup: float, spread: float | None) -> str:
    """"faster" or "slower" when the speedup is beyond its spread, "even" inside it, and "unknown"
    when no spread was measured (a saved run from before the probe): colour only what is measured."""
    if spread is None:
        return "unknown"
    if abs(speedup - 1.0) <= spread:
        return "even"
    return "faster" if speedup > 1.0 else "slower"


def ratio_text(speedup: float, spread: float | None, than: str = "autoregressive") -> str:
    """"1.35x faster than autoregressive (+/- 0.04)", "3.12x slower than ... (0.32x +/- 0.01)" (the
    spread belongs to the speedup, so a slowdown shows both), or "no measurable difference from ...
    (0.98x +/- 0.03)" when the speedup is inside its spread."""
    if spread is not None and abs(speedup - 1.0) <= spread:
        return f"no measurable difference from {than} ({speedup:.2f}x +/- {spread:.2f})"
    if speedup >= 1.0:
        return f"{speedup:.2f}x faster than {than}" + (f" (+/- {spread:.2f})" if spread else "")
    # the spread is of the speedup itself: shown beside it, not beside its inverse
    return f"{1.0 / speedup:.2f}x slower than {than}" + (f" ({speedup:.2f}x +/- {spread:.2f})" if spread else "")


def context_bucket(length: int) -> int:
    """The power of two (at least 128) a context length is rounded up to for caching T(k)."""
    bucket = 128
    while bucket < length:
        bucket *= 2
    return bucket


def measure_cost_curve(runner, seq: list[int], widths: int = CURVE_WIDTHS, repeats: int = CURVE_REPEATS) -> list[float]:
    """T(k) for k = 1..widths: the median time of a k-token forward after ``seq`` (held in the
    runner's cache) over the median one-token forward, widths interleaved so that load hits
    them alike. ``[1.0, 1.1, ...]``; on a GPU it stays near 1, on a small CPU it climbs."""
    times: dict[int, list[float]] = {k: [] for k in range(1, widths + 1)}
    filler = seq[-1]
    for _ in range(repeats):
        for k in range(1, widths + 1):
            start = len(runner.log)
            runner.run(seq + [filler] * k, keep=k)
            times[k].append(runner.log[start].seconds if len(runner.log) > start else 0.0)
            runner.crop(len(seq))
    one = statistics.median(times[1])
    if one <= 0:
        return []
    return [round(statistics.median(times[k]) / one, 3) for k in range(1, widths + 1)]
