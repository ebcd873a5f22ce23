"""The sentence under the figures: it states the headline's verdict (the decode speedup with its
spread, the figure the statistics pane, the status line and the history give) and never says
anything that contradicts it; its cause names what binds (acceptance or cost) from the run's own
figures; where the run's own tau and step costs imply another speedup than the one measured,
beyond the spread, it says so (issue 36)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoders.analysis.summary import drift_withheld, explain, summarize
from decoders.analysis.theory import cost_aware_speedup
from decoders.analysis.timing import verdict
from decoders.core.declarations import get_method
from decoders.core.params import DecodeParams
from decoders.records.run import RunResult
from decoders.records.summary import Summary
from tests.engine.test_timing import timed_run

DATA = Path(__file__).parent.parent / "data"
SAVED = sorted(DATA.glob("run_*.json"))


def shown_verdict(s: Summary) -> str | None:
    """The verdict the statistics pane shows for ``s``, as a user reads it: the decode speedup
    with its spread where there is one, else the end-to-end speedup with its own spread; with no
    spread measured the figure's direction (the pane says "1.05x faster; spread not measured")."""
    if s.speedup_decode is not None:
        speed, spread = s.speedup_decode, s.speedup_spread
    else:
        speed = s.speedup_wall
        spread = s.speedup_wall_spread if s.speedup_wall_spread is not None else s.speedup_spread
    if speed is None:
        return None
    if drift_withheld(s):
        return "withheld"
    v = verdict(speed, spread)
    if v == "unknown":
        return "faster" if speed >= 1.0 else "slower"
    return v


OPENING = {"faster": "faster than autoregressive", "slower": "slower than autoregressive",
           "even": "No measurable difference from autoregressive", "withheld": "so no verdict"}
#: What each verdict must never be said beside: the other verdicts, and the words that conclude
#: the opposite ("any gap is timing noise" beside "1.37x faster").
FORBIDDEN = {
    "faster": ("slower than autoregressive", "no measurable difference", "any gap is timing noise",
               "cannot pay for itself", "would not pay", "cost more than it saved"),
    "slower": ("faster than autoregressive", "no measurable difference", "any gap is timing noise",
               "paid for itself"),
    "even": ("faster than autoregressive", "slower than autoregressive"),
    "withheld": ("faster than autoregressive", "slower than autoregressive", "no measurable difference"),
}


def contradictions(sentence: str, v: str | None) -> list[str]:
    if v is None:
        return [] if "No tokens were timed" in sentence else ["a sentence with a verdict for no figure"]
    found = []
    opening = sentence.split(":")[0]
    if OPENING[v].lower() not in opening.lower():
        found.append(f"opening {opening!r} does not say {OPENING[v]!r}")
    found += [f"says {words!r}" for words in FORBIDDEN[v] if words.lower() in sentence.lower()]
    return found


# -- synthetic runs -------------------------------------------------------------------------------

speeds = st.floats(0.2, 3.0)
spreads = st.one_of(st.none(), st.floats(0.0, 0.6))


@st.composite
def summaries(draw) -> Summary:
    """A run's saved summary with figures anywhere a run can put them, for every method; built
    as a saved run is read (`Summary.from_json`), the method's own figures in its extras."""
    method = draw(st.sampled_from(["ar", "pld", "jacobi", "lookahead", "spec", "spec"]))
    tau = 1.0 if method == "ar" else draw(st.floats(1.0, 4.0))
    iterations = draw(st.integers(2, 60))
    d = {"method": method, "label": method, "finish": "length", "tokens": round(tau * iterations),
         "target_forwards": iterations, "baseline_forwards": round(tau * iterations), "iterations": iterations,
         "tau": tau, "speedup_wall": draw(st.one_of(st.none(), speeds)), "speedup_wall_spread": draw(spreads),
         "speedup_decode": draw(st.one_of(st.none(), speeds)), "speedup_spread": draw(spreads),
         "baseline_ms_per_token": 40.0, "method_ms_per_token": 40.0, "target_fwd_ms": draw(st.floats(20, 60)),
         "pairing": draw(st.sampled_from(["interleaved", "sequential"]))}
    if d["pairing"] == "sequential" and draw(st.booleans()):
        d["drift"] = draw(st.floats(0.5, 1.6))
        d["drift_own_steps"] = draw(st.integers(0, 3))
    if draw(st.booleans()):
        d["implied_speedup"] = draw(speeds)
        d["own_step_ms"] = draw(st.one_of(st.none(), st.floats(20, 60)))
    if method != "ar":
        drafted = draw(st.integers(0, 200))
        accepted = draw(st.integers(0, drafted))
        d |= {"drafted": drafted, "accepted": accepted, "accept_rate": round(accepted / drafted, 3) if drafted else None,
              "verify_cost": draw(st.one_of(st.none(), st.floats(0.7, 3.0))),
              "acceptance_length_histogram": [iterations - 1, 1]}
    if method == "spec":
        alpha, c, gamma = draw(st.floats(0.0, 1.0)), draw(st.floats(0.0, 1.5)), draw(st.integers(1, 10))
        T = [1.0] + [round(1.0 + draw(st.floats(0.0, 0.3)) * k, 3) for k in range(1, 16)]
        d["verify_cost_curve"] = T
        d |= {"gamma": gamma, "gamma_used": gamma, "alpha_hat": alpha, "c_hat": c, "drafting_iterations": iterations - 1,
              "mean_drafted": float(gamma), "plain_steps": 0,
              "predicted_speedup_cost_aware": round(cost_aware_speedup(alpha, gamma, c, T[gamma]), 3)}
    if method == "jacobi":
        d["block"] = 4
    return Summary.from_json(d)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(summaries())
def test_the_sentence_never_contradicts_the_headline(s):
    sentence = explain(s, get_method(s.method))
    v = shown_verdict(s)
    assert not contradictions(sentence, v), (v, contradictions(sentence, v), sentence)


# -- saved runs -------------------------------------------------------------------------------------

FIGURES = [  # (decode speedup, its spread): each verdict, and none measured (a saved run from before)
    (1.37, 0.20), (0.62, 0.05), (1.02, 0.10), (None, None),
]


@pytest.mark.parametrize("figures", FIGURES, ids=["faster", "slower", "even", "as-saved"])
@pytest.mark.parametrize("path", SAVED, ids=[p.stem for p in SAVED])
def test_a_saved_runs_sentence_never_contradicts_its_headline(path, figures):
    """The sentence shown for a saved run (the headless summary's caption; the statistics pane
    shows the same) is derived from the figures shown above it, whatever they hold."""
    from tui_decode.state.run_summary import summary_table

    result = RunResult.load(path)
    s = result.summary
    if figures[0] is not None:
        s.speedup_decode, s.speedup_spread = figures
    sentence = str(summary_table(result).caption)
    v = shown_verdict(s)
    assert not contradictions(sentence, v), (v, contradictions(sentence, v), sentence)


# -- the cause ------------------------------------------------------------------------------------

def spec_summary(alpha: float, c: float, gamma: int, T: list[float], speed: float, spread: float,
                 **more) -> Summary:
    tokens = 1 + sum(alpha ** i for i in range(1, gamma + 1))
    return Summary.from_json({
        "method": "spec", "label": "Speculative", "tokens": 48, "target_forwards": 40, "iterations": 40,
        "tau": round(tokens, 3), "speedup_wall": speed, "speedup_decode": speed, "speedup_spread": spread,
        "pairing": "interleaved", "target_fwd_ms": 50.0, "drafted": 40 * gamma, "accepted": round(40 * alpha),
        "verify_cost": T[gamma], "verify_cost_curve": T, "gamma": gamma, "gamma_used": gamma,
        "alpha_hat": alpha, "c_hat": c, "drafting_iterations": 39, "mean_drafted": float(gamma), "plain_steps": 0,
        "predicted_speedup_cost_aware": round(cost_aware_speedup(alpha, gamma, c, T[gamma]), 3)} | more)


CURVE = [1.0] + [round(1 + 0.08 * k, 3) for k in range(1, 16)]  # T(k): 1.08 for two tokens, 1.16 for three


def sentence_of(s: Summary) -> str:
    return explain(s, get_method(s.method))


@pytest.mark.parametrize("alpha", [0.0, 0.12, 0.24])
def test_a_cheap_head_that_drafts_badly_is_held_back_by_acceptance_not_by_its_cost(alpha):
    """The trained head costs 0.14-0.17 of a target step; what kept it from paying was its
    acceptance, 0-24%: at that acceptance even a free helper would not pay."""
    sentence = sentence_of(spec_summary(alpha, 0.15, 1, CURVE, 0.89, 0.05))
    assert "acceptance binds" in sentence or "acceptance limits it more" in sentence, sentence
    assert "costly" not in sentence and "cost binds" not in sentence and "cost limits" not in sentence, sentence
    if alpha == 0.0:  # a free helper at 0% acceptance: one token per verify that costs more than a step
        assert "acceptance binds, not the helper's cost" in sentence, sentence


def test_a_costly_helper_that_drafts_well_is_held_back_by_its_cost():
    """alpha 0.9 at gamma 4, but a helper forward costing a whole target step: every draft accepted
    would still not pay, while a free helper at this acceptance would."""
    sentence = sentence_of(spec_summary(0.9, 1.0, 4, CURVE, 0.85, 0.05))
    assert "cost binds" in sentence and "acceptance binds" not in sentence, sentence


def test_a_costly_helper_that_drafts_badly_is_held_back_by_both():
    sentence = sentence_of(spec_summary(0.1, 1.0, 4, CURVE, 0.45, 0.05))
    assert "acceptance and cost both bind" in sentence, sentence


def test_neither_alone_binds_where_a_better_acceptance_or_a_cheaper_helper_would_each_pay():
    """alpha 0.5, gamma 2, c 0.5: a free helper would pay (1.6x), every draft accepted would pay
    (1.4x), together they do not (0.83x): the sentence says what each would need."""
    sentence = sentence_of(spec_summary(0.5, 0.5, 2, CURVE, 0.85, 0.05))
    assert "neither alone binds" in sentence, sentence
    assert "a helper costing under 0.30 or with alpha above 0.69" in sentence, sentence
    assert "cost limits it more (a free helper: 1.51x; every draft accepted: 1.39x)" in sentence, sentence


def test_a_run_that_paid_names_no_constraint_and_says_nothing_of_not_paying():
    sentence = sentence_of(spec_summary(0.1, 1.0, 4, CURVE, 1.40, 0.05))
    assert "binds" not in sentence and "cannot pay" not in sentence, sentence


def test_prompt_lookup_short_of_its_verify_cost_is_held_back_by_acceptance():
    s = Summary.from_json({"method": "pld", "label": "Prompt lookup", "tokens": 48, "target_forwards": 46,
                           "iterations": 46, "tau": 1.04, "speedup_wall": 0.80, "speedup_decode": 0.80,
                           "speedup_spread": 0.04, "pairing": "interleaved", "target_fwd_ms": 50.0, "drafted": 80,
                           "accepted": 2, "accept_rate": 0.1, "verify_cost": 1.3,
                           "acceptance_length_histogram": [18, 2], "implied_speedup": 0.82})
    sentence = sentence_of(s)
    assert "acceptance binds" in sentence, sentence


def test_a_measured_speedup_its_own_tau_and_step_costs_do_not_account_for_is_remarked():
    """Prompt lookup: tau and its verify cost imply 0.96x; the headline read 1.11x +/- 0.05, and the
    baseline's one-token steps (55 ms) were slower than the run's own (50 ms)."""
    s = Summary.from_json({"method": "pld", "label": "Prompt lookup", "tokens": 48, "target_forwards": 40,
                           "iterations": 40, "tau": 1.2, "speedup_wall": 1.11, "speedup_decode": 1.11,
                           "speedup_spread": 0.05, "pairing": "interleaved", "target_fwd_ms": 55.0, "drafted": 60,
                           "accepted": 8, "accept_rate": 0.3, "verify_cost": 1.25,
                           "acceptance_length_histogram": [12, 8], "implied_speedup": 0.96, "own_step_ms": 50.0})
    sentence = sentence_of(s)
    assert "imply 0.96x" in sentence, sentence
    assert "the baseline's one-token steps (55.0 ms) were slower than this run's own (50.0 ms)" in sentence, sentence
    assert "timing noise or interference" in sentence, sentence
    s.implied_speedup = 1.09  # inside the spread of 1.11x: nothing to remark
    assert "imply" not in sentence_of(s), sentence_of(s)


def test_autoregressive_read_faster_than_itself_is_not_called_noise_inside_its_spread():
    """`1.37x faster than autoregressive (+/- 0.20)` beside "so any gap is timing noise": the gap is
    beyond the spread, so the sentence says what it is instead."""
    s = Summary.from_json({"method": "ar", "label": "Autoregressive", "tokens": 48, "target_forwards": 48,
                           "iterations": 48, "tau": 1.0, "speedup_wall": 1.35, "speedup_decode": 1.37,
                           "speedup_spread": 0.20, "pairing": "interleaved", "target_fwd_ms": 76.0,
                           "decode_ms_per_token": 55.9, "baseline_decode_ms_per_token": 76.5, "own_step_ms": 55.0})
    sentence = sentence_of(s)
    assert sentence.startswith("1.37x faster than autoregressive (+/- 0.20)"), sentence
    assert "any gap is timing noise" not in sentence, sentence
    assert "the baseline's one-token steps (76.0 ms) were slower than this run's own (55.0 ms)" in sentence, sentence
    s.speedup_decode = 1.05  # inside the spread: noise it is
    assert "timing noise" in sentence_of(s) and sentence_of(s).startswith("No measurable difference")


def test_summarize_finds_what_the_runs_own_steps_imply():
    """An autoregressive run whose one-token steps took 40 ms beside a baseline whose took 50 ms:
    its tau and its own steps imply 1.00x, the measured 1.25x is the baseline's slowness, and the
    sentence says so."""
    baseline = timed_run([200.0] + [50.0 + (i % 2) for i in range(39)])
    baseline.time_ms["main_fwd_mean"] = 50.5  # its one-token forwards, as the runner times them
    method = timed_run([200.0] + [40.0 + (i % 2) for i in range(39)])
    s = summarize(method, baseline, DecodeParams(method="ar"), pairing="interleaved")
    assert s.implied_speedup == pytest.approx(1.0, abs=0.01)
    assert s.own_step_ms == pytest.approx(40.5, abs=0.1)
    assert s.speedup_decode == pytest.approx(1.24, abs=0.02) and verdict(s.speedup_decode, s.speedup_spread) == "faster"
    assert "were slower than this run's own" in s.explanation, s.explanation
    saved = Summary.from_json(json.loads(json.dumps(s.to_json())))  # the figures survive a save
    assert saved.implied_speedup == s.implied_speedup and saved.own_step_ms == s.own_step_ms
    assert math.isclose(saved.speedup_decode, s.speedup_decode)
