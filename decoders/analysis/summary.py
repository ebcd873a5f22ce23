"""The figures a run is judged by, computed from the method run and its baseline (their saved
shape, `Summary`, is declared in `decoders.records.summary`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from decoders.analysis.calibration import Calibration, widen
from decoders.analysis.sentence import explain, sentence
from decoders.analysis.stats import DecodeStats
from decoders.analysis.timing import (
    Drift,
    decode_rate,
    machine_change,
    one_token_steps,
    paired_drift,
    paired_speedup,
    rse,
    step_jitter,
    time_to,
    wall_spread,
)
from decoders.analysis.verdict import withheld
from decoders.records.summary import ALWAYS_SAVED, NEAR_TIE, Summary

if TYPE_CHECKING:
    from decoders.core.params import DecodeParams
    from decoders.records.run import Run

__all__ = ["ALWAYS_SAVED", "NEAR_TIE", "Summary", "explain", "first_divergence", "sentence", "summarize"]


def _calibrated(s: Summary, calibration: Calibration) -> None:
    """Widen the speedups' spreads by the machine's run-to-run noise; the run's own (step
    jitter only) stays as ``speedup_spread_steps``."""
    s.calibration = calibration.as_dict()
    if s.speedup_decode is not None:
        s.speedup_spread_steps = s.speedup_spread
        floor = calibration.step_floor(s.tokens) * s.speedup_decode
        wide = widen(s.speedup_decode, s.speedup_spread, calibration.noise, floor)
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
    implied_speed, own_step = implied(method, base_fwd)
    s.implied_speedup = round(implied_speed, 3) if implied_speed and round(implied_speed, 3) > 0 else None
    s.own_step_ms = None if own_step is None else round(own_step, 3)
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


#: Own one-token steps a run needs before they stand for its step time (`implied`).
OWN_STEPS = 3


def implied(method: Run, base_fwd: float) -> tuple[float | None, float | None]:
    """(the speedup the run's own tau and step costs imply, its own one-token step in ms): decode
    tokens per the time its iterations spent drafting and verifying, in its own one-token steps
    (the baseline's where it took under `OWN_STEPS`). Beside the measured speedup it says whether
    the run's own figures account for what was measured (`explain`)."""
    own = one_token_steps(method)
    own_step = sum(own) / len(own) if len(own) >= OWN_STEPS else None
    unit = own_step or base_fwd
    decode = method.iters[1:]  # iteration 0 also prefills the prompt
    tokens = sum(len(it.emit) for it in decode)
    cost = sum(it.t_draft_ms + it.t_verify_ms for it in decode)
    if not tokens or cost <= 0 or not unit:
        return None, own_step
    return tokens * unit / cost, own_step


def drift_withheld(s: Summary) -> bool:
    """A sequential pairing whose drift is too large to trust a verdict from (`verdict.withheld`)."""
    return withheld(s)
