"""The figures a run is judged by, computed from the method run and its baseline (their saved
shape, `Summary`, is declared in `decoders.records.summary`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from decoders.analysis.calibration import Calibration, widen
from decoders.analysis.stats import DecodeStats
from decoders.analysis.timing import (
    Drift,
    decode_rate,
    machine_change,
    one_token_steps,
    paired_drift,
    paired_speedup,
    ratio_text,
    rse,
    step_jitter,
    time_to,
    wall_spread,
)
from decoders.core.declarations import baseline_method
from decoders.records.summary import ALWAYS_SAVED, NEAR_TIE, Summary

if TYPE_CHECKING:
    from decoders.core.params import DecodeParams
    from decoders.records.run import Run

__all__ = ["ALWAYS_SAVED", "NEAR_TIE", "Summary", "explain", "first_divergence", "summarize"]


def _calibrated(s: Summary, calibration: Calibration) -> None:
    """Widen the speedups' spreads by the machine's run-to-run noise; the run's own (step
    jitter only) stays as ``speedup_spread_steps``."""
    s.calibration = calibration.as_dict()
    if s.speedup_decode is not None:
        s.speedup_spread_steps = s.speedup_spread
        wide = widen(s.speedup_decode, s.speedup_spread, calibration.noise)
        s.speedup_spread = None if wide is None else round(wide, 3)
    if s.speedup_wall is not None:
        wide = widen(s.speedup_wall, s.speedup_wall_spread, calibration.noise)
        s.speedup_wall_spread = None if wide is None else round(wide, 3)


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first token where ``a`` and ``b`` differ (a length difference counts)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def summarize(method: Run, baseline: Run, params: DecodeParams, prompt_tokens: int | None = None,
              probe_ms: list[float] | None = None, cost_curve: list[float] | None = None,
              pairing: str = "sequential", calibration: Calibration | None = None) -> Summary:
    """The figures of ``method`` against ``baseline``; ``pairing`` says how the baseline was timed
    ("interleaved" with the method, or "sequential": decoded before it, ``probe_ms`` after it).
    ``calibration``, the machine's run-to-run noise, widens the spreads to cover a second
    measurement (`decoders.analysis.calibration`) before anything is judged by them."""
    emitted = len(method.ids)
    target_forwards = method.n_forward.get("main", 0)
    base_ms = baseline.time_ms["wall"] or 0.0  # a finished run's wall time is always measured
    method_ms = method.time_ms["wall"] or 0.0
    base_fwd = baseline.time_ms.get("main_fwd_mean") or 0.0
    stats = DecodeStats.of(method.iters)
    method_def = params.method_def
    s = Summary(
        method=method.method,
        label=method.label,
        finish=method.finish,
        tokens=emitted,
        target_forwards=target_forwards,
        baseline_forwards=baseline.n_forward.get("main", 0),
        iterations=len(method.iters),
        tau=round(emitted / target_forwards, 3) if target_forwards else None,
        speedup_wall=round(base_ms / method_ms, 3) if method_ms > 0 else None,
        baseline_ms=round(base_ms, 2),
        method_ms=round(method_ms, 2),
        baseline_ms_per_token=round(base_ms / max(len(baseline.ids), 1), 2),
        method_ms_per_token=round(method_ms / max(emitted, 1), 2),
        target_fwd_ms=round(base_fwd, 3),
        prompt_tokens=prompt_tokens,
        verify_cost_curve=cost_curve or None,
    )
    s.pairing = pairing
    if pairing == "interleaved":
        _paired_speedups(s, method, baseline)
    else:
        _speedups(s, method, baseline, probe_ms or [])
    if calibration is not None:
        _calibrated(s, calibration)
    if stats.drafts or not method_def.baseline:
        s.drafted = stats.draft_tokens
        s.accepted = stats.accepted
        s.accept_rate = stats.acceptance
        s.draft_use = stats.draft_acceptance_rate
        s.mean_acceptance_length = stats.mean_acceptance_length
        s.per_position_acceptance = stats.per_position_acceptance
        s.per_position_acceptance_conditional = stats.per_position_acceptance_conditional
        s.acceptance_length_histogram = list(stats.accept_lengths)
        # iteration 0 also prefills the prompt: leave it out of the per-step cost
        multi = [it.t_verify_ms for it in method.iters[1:] if it.draft]
        if multi and base_fwd:
            # how many one-token forwards a verify forward costs; the theorem assumes 1
            s.verify_cost = round(sum(multi) / len(multi) / base_fwd, 3)
    if method_def.extras is not None:
        s.extras = method_def.extras(method, stats, params, s)
    if params.greedy:
        if method.finish != "cancelled" and baseline.finish != "cancelled":
            div = first_divergence(baseline.ids, method.ids)
        else:  # a cancelled pair agrees or not over the tokens both produced
            both = min(len(baseline.ids), len(method.ids))
            div = first_divergence(baseline.ids[:both], method.ids[:both])
        s.identical = div is None
        s.first_divergence = div
    s.explanation = explain(s, method_def)
    return s


def _paired_speedups(s: Summary, method: Run, baseline: Run) -> None:
    """Rates over the tokens both runs produced, timed in the same seconds (interleaved): no drift
    to correct; the spread from the paired chunks (`paired_speedup`)."""
    s.ttft_ms = method.time_ms.get("ttft")
    s.baseline_ttft_ms = baseline.time_ms.get("ttft")
    m_rate, _ = decode_rate(method)
    b_rate, _ = decode_rate(baseline)
    s.decode_ms_per_token = None if m_rate is None else round(m_rate, 3)
    s.baseline_decode_ms_per_token = None if b_rate is None else round(b_rate, 3)
    n = min(len(method.ids), len(baseline.ids))
    s.compared_tokens = n
    t_method, t_base = time_to(method, n), time_to(baseline, n)
    if n and t_method and t_base:
        s.speedup_wall = round(t_base / t_method, 3)
    paired = paired_speedup(method, baseline, n)
    if paired is not None:
        s.speedup_decode = round(paired.speedup, 3)
        s.speedup_spread = None if paired.spread is None else round(paired.spread, 3)
    jitter = step_jitter(one_token_steps(baseline))
    if s.speedup_wall is not None and paired is not None and paired.spread is not None:
        spread = wall_spread(method, baseline, n, s.speedup_wall, jitter)
        s.speedup_wall_spread = None if spread is None else round(spread, 3)
    change = machine_change(baseline)
    s.machine_change = None if change is None else round(change, 3)


def _speedups(s: Summary, method: Run, baseline: Run, probe_ms: list[float]) -> None:
    """Rates, phase by phase, over the tokens both runs produced, rescaled by the drift measured
    right after the run; their spread from the timing noise of both samples."""
    s.ttft_ms = method.time_ms.get("ttft")
    s.baseline_ttft_ms = baseline.time_ms.get("ttft")
    m_rate, _ = decode_rate(method)
    b_rate, _ = decode_rate(baseline)
    s.decode_ms_per_token = None if m_rate is None else round(m_rate, 3)
    s.baseline_decode_ms_per_token = None if b_rate is None else round(b_rate, 3)
    # The machine's speed now against then: the run's own one-token target steps and the probe
    # after it, each paired with the baseline's step at the same context.
    drift, own = paired_drift(baseline, method, probe_ms) if probe_ms else (Drift(1.0, 0.0), 0)
    s.drift = round(drift.factor, 3)
    s.drift_own_steps = own
    s.probe_ms = probe_ms or None
    n = min(len(method.ids), len(baseline.ids))
    s.compared_tokens = n
    t_method, t_base = time_to(method, n), time_to(baseline, n)
    if n and t_method and t_base:
        s.speedup_wall = round(t_base * drift.factor / t_method, 3)
    if m_rate and b_rate:
        s.speedup_decode = round(b_rate * drift.factor / m_rate, 3)
        s.speedup_decode_raw = round(b_rate / m_rate, 3)
    if probe_ms:
        # Two standard errors of the ratio: the drift's, and the step-time noise of each rate. The
        # baseline's one-token steps give that noise; the method's steps are taken as equally noisy
        # (its own per-iteration times vary with acceptance by design, not by timing noise). Where
        # the drift already holds the method's own one-token steps (autoregressive decoding, the
        # undrafted steps of the others), their noise is in it and is not counted twice.
        steps = rse(one_token_steps(baseline))
        rel = (drift.rel_error ** 2 + (1 if own >= len(probe_ms) else 2) * steps ** 2) ** 0.5
        s.speedup_spread = round(2 * rel * (s.speedup_decode or s.speedup_wall or 1.0), 3)
        if s.speedup_wall is not None:
            spread = wall_spread(method, baseline, n, s.speedup_wall, step_jitter(one_token_steps(baseline)))
            s.speedup_wall_spread = None if spread is None else round(max(spread, s.speedup_spread), 3)


#: A sequential pairing whose drift moved the machine's step time more than this share cannot say
#: whether the change happened before the run or inside it: its verdict is withheld.
DRIFT_WITHHELD = 0.2
#: An interleaved run whose machine moved more than this share is told so (the ratio holds).
MACHINE_MOVED = 0.10


def explain(s: Summary, method_def) -> str:
    """The sentence under the figures: the decode speedup's verdict (the figure above it, with its
    spread), how the baseline was paired when the machine moved, then why, from the run's own
    figures. It never states a verdict the figures do not hold."""
    sentence = _why(s, method_def)
    return f"{sentence} {_machine(s)}".strip()


def _machine(s: Summary) -> str:
    if s.pairing == "interleaved" and s.machine_change is not None and abs(s.machine_change - 1) >= MACHINE_MOVED:
        return (f"The machine's step time moved {s.machine_change:.2f}x during the run; the baseline stepped in "
                "alternation with it, so both saw the change and the ratio holds.")
    return ""


def drift_withheld(s: Summary) -> bool:
    """A sequential pairing whose drift is too large to trust a verdict from: read from the probe
    after the run (not from the run's own steps), it cannot say when the machine changed."""
    return (s.pairing == "sequential" and s.drift is not None and not s.drift_own_steps
            and abs(s.drift - 1) > DRIFT_WITHHELD)


def _why(s: Summary, method_def) -> str:
    speed = s.speedup_wall
    if speed is None:
        return "No tokens were timed."
    if s.speedup_decode is not None:  # the steady state: the prefill is reported apart (ttft)
        speed = s.speedup_decode
    if drift_withheld(s):
        raw = f", {s.speedup_decode_raw:.2f}x raw" if s.speedup_decode_raw is not None else ""
        headline = (f"the machine's speed changed during the run (its steps took {s.drift:.2f}x as long after it as "
                    f"in the baseline before it), so no verdict: {speed:.2f}x corrected{raw}; run again, or pair "
                    "the baseline interleaved")
    else:
        headline = ratio_text(speed, s.speedup_spread)
    if s.compared_tokens is not None and s.compared_tokens < s.tokens or \
            (s.compared_tokens is not None and s.finish == "cancelled"):
        headline += f", over the first {s.compared_tokens} tokens"
    if s.method == baseline_method().name:
        return (f"{headline[0].upper()}{headline[1:]}: autoregressive decoding is the baseline itself, one target "
                f"forward per token ({s.decode_ms_per_token or s.method_ms_per_token:.1f} ms/token here against "
                f"{s.baseline_decode_ms_per_token or s.baseline_ms_per_token:.1f} in the baseline run), so any gap "
                "is timing noise.")
    tau = s.tau or 0.0
    cost = s.verify_cost
    cost_txt = f"a verify forward cost {cost:.2f}x a one-token step" if cost else "no forward verified a draft"
    if method_def.explain is not None:
        return f"{headline[0].upper()}{headline[1:]}: {method_def.explain(s, cost_txt)}."
    return (f"{headline[0].upper()}{headline[1:]}: {method_def.noun or method_def.label.lower()} emitted "
            f"{tau:.2f} tokens per target forward, {s.accepted or 0} of {s.drafted or 0} drafted tokens accepted, "
            f"and {cost_txt}.")
