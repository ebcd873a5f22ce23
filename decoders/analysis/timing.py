"""Speedups a user can act on: rates compared phase by phase, over the tokens both runs produced,
with the timing noise measured in the same run.

Interleaved (the engine's default, `decoders.engine`): the baseline stepped between the method's
iterations, each run's clock stopped while the other ran, so both were timed in the same seconds
of the machine's life. `paired_speedup` is the baseline's time over the method's for the same
decode tokens; a machine that slows mid-run slows both sides alike, so the ratio holds. Its spread
is the step-to-step jitter of the machine (two standard errors, about 95%) and the one turn of
the alternation by which a change of speed can reach one side before the other.
`machine_change` reports how far the machine moved meanwhile (the baseline's own steps, last
third against first third).

Sequential (the bench, or a backend that cannot make a second cache): the baseline is decoded
once per prompt and settings and reused, so by the time a method runs the machine may be busier
or quieter than when the baseline ran. The machine's speed now is read from one-token target steps
timed in the run itself: the method's own undrafted steps (every step of autoregressive decoding)
and a short burst of steps right after it (the probe). Each is paired with the baseline's step at
the same context (`paired_drift`): the mean ratio (the drift) rescales the baseline to now, and
its error with the baseline's step noise gives every speedup its spread. The mean, not the median:
a rate is a sum of steps. The raw ratio (no drift) is kept beside it.

A speedup inside its spread reads "no measurable difference".
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generator, Sequence

from decoders.analysis.verdict import ratio_text as ratio_text  # declared there, read here by older callers
from decoders.analysis.verdict import verdict as verdict
from decoders.core.events import PhaseStarted, Progress

if TYPE_CHECKING:
    from decoders.records.run import Run

PROBE_STEPS = 5  # one-token steps in the probe after each method run
CURVE_WIDTHS = 16  # the verify-cost curve T(k) is measured for k = 1..16
CURVE_REPEATS = 2
#: Seconds between the curve's forwards after a run, for the UI that waits on the result (see
#: `cost_curve_steps`): the keys stay responsive while T(k) is measured.
CURVE_PAUSE = 0.005
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


@dataclass(frozen=True)
class Paired:
    """An interleaved run's decode speedup: the baseline's time over the method's for the same
    tokens, and its spread (None: too few steps to say)."""

    speedup: float
    spread: float | None
    tokens: int  # the decode tokens compared
    jitter: float | None = None  # the machine's step-to-step noise, relative (see `step_jitter`)


def paired_speedup(method: Run, baseline: Run, tokens: int) -> Paired | None:
    """The decode speedup of an interleaved pair over the tokens after the method's first iteration
    (it holds the prefill) up to the last method iteration that ends within ``tokens``; None when
    there is no such decode iteration.

    Its spread combines two errors. Timing jitter: the baseline's one-token steps are the same work
    step after step, so their successive log-differences are the machine's step-to-step noise
    (a slow trend, the context's growth or a machine turning busy, cancels in a difference); each
    side's total carries it over its own forwards, and two standard errors of the ratio follow.
    Alternation: the two runs take turns, so a change of the machine's speed is seen by one side up
    to one turn before the other; each side's total can be off by that turn's share of the change,
    ``|machine change - 1| / iterations`` (a bound, taken once per side)."""
    emitted, n0, t0, n1, t1, iterations = 0, None, None, None, None, 0
    for it in method.iters:
        emitted += len(it.emit)
        if emitted > tokens or it.t_end_ms is None:
            break
        if n0 is None:
            n0, t0 = emitted, it.t_end_ms
        else:
            n1, t1, iterations = emitted, it.t_end_ms, iterations + 1
    if n0 is None or t0 is None or n1 is None or t1 is None or t1 <= t0:
        return None
    b0, b1 = time_to(baseline, n0), time_to(baseline, n1)
    if b0 is None or b1 is None or b1 <= b0:
        return None
    ratio = (b1 - b0) / (t1 - t0)
    steps = [it.t_verify_ms for it in baseline.iters[n0:n1] if _plain(it)]
    if len(steps) < 3:
        return Paired(ratio, None, n1 - n0)
    jitter = step_jitter(steps)
    rel = jitter * (1 / len(steps) + 1 / iterations) ** 0.5
    change = machine_change(baseline) or 1.0
    turn = 2 * abs(change - 1.0) / iterations
    return Paired(ratio, ratio * ((2 * rel) ** 2 + turn ** 2) ** 0.5, n1 - n0, jitter)


def step_jitter(steps: Sequence[float]) -> float:
    """The relative step-to-step noise of steps that are the same work: the root mean square of
    successive log-differences over sqrt 2 (a slow trend cancels in a difference)."""
    logs = [math.log(x) for x in steps if x > 0]
    if len(logs) < 2:
        return 0.0
    return (statistics.fmean([(b - a) ** 2 for a, b in zip(logs, logs[1:], strict=False)]) / 2) ** 0.5


def wall_spread(method: Run, baseline: Run, tokens: int, speedup: float, jitter: float) -> float | None:
    """Two standard errors of the end-to-end speedup over the first ``tokens`` tokens.

    The prefill is one forward on each side, so its noise is not averaged away as the decode's is
    over its steps, and a load burst of a second lands on one prefill whole. Its noise is read
    from the pair itself: the two prefill forwards (each side's first target forward, over the same
    prompt) differ by timing noise only, so their log-ratio over sqrt 2 is the prefill's relative
    noise (at least the steps' ``jitter``). A prefill slow by chance then widens this spread and
    leaves the decode speedup alone."""
    first_m = method.iters[0].t_verify_ms if method.iters else 0.0
    first_b = baseline.iters[0].t_verify_ms if baseline.iters else 0.0
    prefill_noise = jitter
    if first_m > 0 and first_b > 0:
        prefill_noise = max(jitter, abs(math.log(first_m / first_b)) / 2 ** 0.5)
    parts = []
    for run in (method, baseline):
        total, prefill = time_to(run, tokens), run.time_ms.get("ttft")
        if not total or prefill is None:
            return None
        decode = max(total - prefill, 0.0)
        steps = max(len(run.iters) - 1, 1)
        parts.append(((prefill_noise * prefill) ** 2 + (jitter * decode) ** 2 / steps) / total ** 2)
    return 2 * speedup * sum(parts) ** 0.5


@dataclass(frozen=True)
class Pooled:
    """Repeated runs' decode speedups pooled: their mean and two standard errors."""

    speedup: float
    spread: float
    n: int


def pool(summaries) -> Pooled | None:
    """The mean decode speedup of ``summaries`` (runs of one prompt and settings) and two standard
    errors: the spread between the runs over sqrt n, or the runs' own mean spread over sqrt n where
    that is larger (two runs that agree by chance say little)."""
    speeds = [s.speedup_decode for s in summaries if s.speedup_decode is not None]
    if not speeds:
        return None
    n = len(speeds)
    mean = statistics.fmean(speeds)
    between = 2 * statistics.stdev(speeds) / n ** 0.5 if n > 1 else 0.0
    own = [s.speedup_spread for s in summaries if s.speedup_spread is not None]
    within = statistics.fmean(own) / n ** 0.5 if own else 0.0
    return Pooled(mean, max(between, within), n)


def machine_change(baseline: Run) -> float | None:
    """How much slower (> 1) the machine stepped at the end of the run than at its start: the mean
    of the baseline's one-token steps in the last third over the first third (None: under six)."""
    steps = one_token_steps(baseline)
    third = len(steps) // 3
    if third < 2:
        return None
    first, last = statistics.fmean(steps[:third]), statistics.fmean(steps[-third:])
    return last / first if first > 0 else None


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


def context_bucket(length: int) -> int:
    """The power of two (at least 128) a context length is rounded up to for caching T(k)."""
    bucket = 128
    while bucket < length:
        bucket *= 2
    return bucket


def cost_curve_steps(runner, seq: list[int], widths: int = CURVE_WIDTHS, repeats: int = CURVE_REPEATS,
                     pause: float = 0.0) -> Generator[int, None, list[float]]:
    """`measure_cost_curve` one forward at a time: yields the forwards done after each (of
    ``widths * repeats``) and returns the curve. ``pause`` seconds between forwards leave the GIL
    and the cores to another thread (a UI) for a moment; each forward is timed on its own, so the
    pause changes no figure."""
    times: dict[int, list[float]] = {k: [] for k in range(1, widths + 1)}
    filler = seq[-1]
    done = 0
    for _ in range(repeats):
        for k in range(1, widths + 1):
            start = len(runner.log)
            runner.run(seq + [filler] * k, keep=k)
            times[k].append(runner.log[start].seconds if len(runner.log) > start else 0.0)
            runner.crop(len(seq))
            done += 1
            yield done
            if pause:
                time.sleep(pause)
    one = statistics.median(times[1])
    if one <= 0:
        return []
    return [round(statistics.median(times[k]) / one, 3) for k in range(1, widths + 1)]


def measure_cost_curve(runner, seq: list[int], widths: int = CURVE_WIDTHS, repeats: int = CURVE_REPEATS) -> list[float]:
    """T(k) for k = 1..widths: the median time of a k-token forward after ``seq`` (held in the
    runner's cache) over the median one-token forward, widths interleaved so that load hits
    them alike. ``[1.0, 1.1, ...]``; on a GPU it stays near 1, on a small CPU it climbs."""
    steps = cost_curve_steps(runner, seq, widths, repeats)
    while True:
        try:
            next(steps)
        except StopIteration as finished:
            return finished.value


def curve_phase(runner, seq: list[int], cancelled: Callable[[], bool] = lambda: False):
    """The cost curve measured after a run as a phase of its own: `PhaseStarted` ("curve", its
    forwards as the total), then a `Progress` after each forward (`cost_curve_steps`, with
    `CURVE_PAUSE` between them). A generator whose return value is the curve; None when
    ``cancelled()`` turned true first (nothing is kept; the runner's cache holds ``seq`` again)."""
    if cancelled():
        return None
    total = CURVE_WIDTHS * CURVE_REPEATS
    yield PhaseStarted("curve", "T(k)", total)
    steps = cost_curve_steps(runner, seq, pause=CURVE_PAUSE)
    try:
        while True:
            yield Progress("curve", next(steps), total)
            if cancelled():
                return None
    except StopIteration as finished:  # the curve is the steps' return value
        return finished.value


def probe_steps(runner, seq: list[int], context_length: int) -> list[float]:
    """Milliseconds of a few one-token steps at the end of ``seq`` (held in the runner's cache
    after a run), to compare with the baseline's own steps: the machine's speed now."""
    if len(seq) + PROBE_STEPS > context_length or not seq:
        return []
    start = len(runner.log)
    for i in range(PROBE_STEPS):
        runner.run(seq + [seq[-1]] * (i + 1))
    runner.crop(len(seq))
    return [round(1000 * f.seconds, 3) for f in runner.log[start:] if f.positions == 1]
