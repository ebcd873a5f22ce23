"""Speedups from rates: phase by phase, over the tokens both runs produced, rescaled by the drift
the probe measures, with a spread; the sentence says "3.1x slower", never "0.32x slower"."""

from __future__ import annotations

import pytest

from decoders.analysis.summary import summarize
from decoders.analysis.timing import paired_drift, ratio_text, time_to
from decoders.core.params import DecodeParams
from decoders.records.run import Emitted, Iteration, Run


def timed_run(step_ms: list[float], method: str = "ar", per_iter: int = 1, finish: str = "length") -> Run:
    """A run whose iteration i emits ``per_iter`` tokens and ends at sum(step_ms[:i + 1])."""
    iters, t = [], 0.0
    for k, step in enumerate(step_ms):
        t += step
        iters.append(Iteration(k=k, pos=k * per_iter, draft=[], emit=[Emitted(1, "x", "ar")] * per_iter,
                               t_verify_ms=step, t_end_ms=t))
    n = per_iter * len(step_ms)
    return Run(label=method, method=method, ids=[1] * n, kinds=["ar"] * n, tok_iter=[], iters=iters, finish=finish,
               n_forward={"main": len(step_ms)}, time_ms={"wall": t, "ttft": step_ms[0], "main_fwd_mean": 40.0})


def test_a_run_cancelled_early_is_compared_over_the_tokens_both_produced():
    baseline = timed_run([200.0] + [40.0] * 49)  # 50 tokens, prefill 200 ms
    cancelled = timed_run([200.0, 202.0], finish="cancelled")  # 2 tokens, then cancelled
    s = summarize(cancelled, baseline, DecodeParams(method="ar"), prompt_tokens=10, probe_ms=[40.0] * 5)
    assert s.compared_tokens == 2
    assert s.speedup_wall == pytest.approx(240 / 402, abs=1e-3)  # not 2160 / 402 = 5.4x
    assert s.speedup_decode == pytest.approx(40 / 202, abs=1e-3)
    assert "slower than autoregressive" in s.explanation and "over the first 2 tokens" in s.explanation
    assert s.ttft_ms == 200.0 and s.baseline_ttft_ms == 200.0 and s.prompt_tokens == 10


def test_prefill_is_kept_out_of_the_decode_rate():
    baseline = timed_run([3000.0] + [40.0] * 19)
    method = timed_run([3000.0] + [80.0] * 5, per_iter=4)  # 4 tokens per 80 ms after the prefill
    s = summarize(method, baseline, DecodeParams(method="ar"), probe_ms=[40.0] * 5)
    assert s.decode_ms_per_token == pytest.approx(20.0) and s.baseline_decode_ms_per_token == pytest.approx(40.0)
    assert s.speedup_decode == pytest.approx(2.0, abs=1e-3)


def test_a_slower_machine_now_rescales_the_cached_baseline():
    baseline = timed_run([100.0] + [40.0] * 19)
    method = timed_run([150.0] + [60.0] * 19)  # the same steps, on a machine 1.5x busier now
    s = summarize(method, baseline, DecodeParams(method="ar"), probe_ms=[59.0, 60.0, 61.0, 60.0, 60.0])
    assert s.drift == pytest.approx(1.5, abs=1e-3)
    assert s.speedup_decode == pytest.approx(1.0, abs=1e-3) and s.speedup_wall == pytest.approx(1.0, abs=1e-3)
    assert s.explanation.startswith("No measurable difference from autoregressive (1.00x +/- ")


def test_spread_grows_with_the_noise_of_the_probe():
    baseline, method = timed_run([100.0, 40.0, 40.5, 39.5, 40.0]), timed_run([100.0])
    quiet, _ = paired_drift(baseline, method, [40.0, 40.2, 39.8, 40.0])
    noisy, _ = paired_drift(baseline, method, [30.0, 55.0, 38.0, 49.0])
    assert quiet.rel_error < 0.01 < noisy.rel_error


@pytest.mark.parametrize("speedup,spread,text", [
    (0.32, 0.01, "3.12x slower than autoregressive (0.32x +/- 0.01)"),
    (0.525, 0.039, "1.90x slower than autoregressive (0.53x +/- 0.04)"),
    (0.5, None, "2.00x slower than autoregressive (0.50x; spread not measured)"),  # as the pane says it
    (1.35, 0.04, "1.35x faster than autoregressive (+/- 0.04)"),
    (0.97, 0.05, "no measurable difference from autoregressive (0.97x +/- 0.05)"),
])
def test_ratio_text(speedup, spread, text):
    assert ratio_text(speedup, spread) == text


def test_time_to_reads_the_iteration_that_emitted_the_token():
    run = timed_run([100.0, 10.0, 10.0], per_iter=3)
    assert [time_to(run, n) for n in (1, 3, 4, 9, 10)] == [100.0, 100.0, 110.0, 120.0, None]


def test_a_near_tie_reads_as_numerics():
    baseline = timed_run([100.0] + [40.0] * 9)
    s = summarize(timed_run([100.0] + [40.0] * 9), baseline, DecodeParams(method="ar"))
    s.divergence = {"at": 3, "margin": 4e-5, "top2": ["a", "b"], "baseline": "a", "method": "b"}
    assert "numerical near-tie" in s.divergence_text() and "bug" not in s.divergence_text()


def test_the_runs_own_one_token_steps_count_as_the_machine_now():
    """A probe that caught a quiet moment after a busy run must not read as a slower method:
    autoregressive decoding against its own baseline reads 1.00x from its own steps."""
    baseline = timed_run([100.0] + [40.0] * 19)
    method = timed_run([150.0] + [60.0] * 19)  # busier during the whole run...
    s = summarize(method, baseline, DecodeParams(method="ar"), probe_ms=[40.0, 41.0, 40.0, 39.0, 40.0])  # ...not after
    assert s.drift == pytest.approx(1.5, abs=1e-3)
    assert s.speedup_decode == pytest.approx(1.0, abs=1e-3)
    several = timed_run([150.0] + [60.0] * 5, per_iter=4)  # drafted iterations are no one-token steps
    s = summarize(several, baseline, DecodeParams(method="ar"), probe_ms=[40.0] * 5)
    assert s.drift == pytest.approx(1.0, abs=1e-3)


def test_a_machine_that_turned_busy_mid_run_widens_the_spread():
    """The last 16 of 40 steps on a machine 3x busier (another process started): the rate is a
    sum of steps, so the drift is the mean ratio (1.8), autoregressive decoding still reads 1.00x,
    and the spread says the machine moved during the run (a median would have read 1.0 from the
    quiet steps and called the run 0.56x)."""
    baseline = timed_run([100.0] + [40.0] * 40)
    method = timed_run([100.0] + [40.0] * 24 + [120.0] * 16)
    s = summarize(method, baseline, DecodeParams(method="ar"), probe_ms=[120.0] * 5)
    assert s.drift == pytest.approx(1.8, abs=1e-3)
    assert abs(s.speedup_decode - 1.0) <= s.speedup_spread
    assert s.speedup_spread > 0.1
    quiet = summarize(timed_run([100.0] + [40.0, 40.4, 39.6] * 13 + [40.0]), baseline, DecodeParams(method="ar"),
                      probe_ms=[40.0] * 5)
    assert quiet.speedup_spread < 0.03


def test_steps_are_paired_by_context_so_a_shared_trend_is_no_noise():
    """Both runs step slower as the context grows (40 -> 59 ms); the machine is 1.2x slower now.
    Paired at equal positions the drift is exact and its error nil; unpaired medians would carry
    the trend as noise (about 4%)."""
    from decoders.analysis.timing import rse

    base_steps = [40.0 + i for i in range(20)]
    baseline = timed_run([100.0] + base_steps)
    method = timed_run([120.0] + [1.2 * x for x in base_steps])
    drift, own = paired_drift(baseline, method, [1.2 * 59.0] * 4)
    assert own == 20 and drift.factor == pytest.approx(1.2) and drift.rel_error < 1e-9
    assert rse(base_steps) > 0.02  # what an unpaired comparison would have called noise
    s = summarize(method, baseline, DecodeParams(method="ar"), probe_ms=[1.2 * 59.0] * 4)
    assert s.speedup_decode == pytest.approx(1.0, abs=1e-3)


def test_a_wide_forward_that_verified_nothing_is_no_one_token_step():
    """Lookahead's iteration with no n-gram hit emits one token after a wide forward: not a probe
    of the machine's one-token speed."""
    from decoders.analysis.timing import one_token_steps
    from decoders.methods.lookahead import LookaheadStep

    run = timed_run([100.0] + [120.0] * 5)
    for it in run.iters[1:]:
        it.detail = LookaheadStep(pool=0, hits=0, accepted=0, window=[], added=0)
    assert one_token_steps(run) == []
    assert one_token_steps(timed_run([100.0] + [40.0] * 5)) == [40.0] * 5


def test_a_drift_read_after_the_run_only_withholds_the_verdict_and_shows_raw_beside_corrected():
    """The issue's case: a method with no one-token steps of its own, its probe after the run 0.58x
    the baseline's steps (the load dropped): no "2.15x slower" in red but the machine's change, the
    corrected and the raw figure."""
    baseline = timed_run([100.0] + [100.0] * 19)
    method = timed_run([100.0] + [250.0] * 5, per_iter=4)  # 62.5 ms/token against 100: raw 1.60x
    s = summarize(method, baseline, DecodeParams(method="pld"), probe_ms=[58.0] * 5)
    assert s.drift == pytest.approx(0.58) and s.drift_own_steps == 0
    assert s.speedup_decode_raw == pytest.approx(1.6, abs=1e-3)
    assert s.speedup_decode == pytest.approx(0.928, abs=1e-3)
    assert s.explanation.startswith("The machine's speed changed during the run")
    assert "0.93x corrected, 1.60x raw" in s.explanation and "slower than" not in s.explanation
