"""Every method on tiny random models: greedy methods reproduce the baseline exactly; budgets,
stop tokens, records and the baseline cache behave."""

from __future__ import annotations

import json

import pytest
import torch

from decoders.core.events import PhaseStarted
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.records.kinds import EMIT_KINDS
from decoders.records.run import RunResult
from tests.support.engine import PROMPT, tiny_family

GREEDY_CASES = [
    DecodeParams(method="spec", gamma=1, draft_policy="fixed"),
    DecodeParams(method="spec", gamma=4, draft_policy="fixed"),
    DecodeParams(method="spec", gamma=7, record=False, draft_policy="fixed"),
    DecodeParams(method="spec", gamma=4),  # adaptive draft length: never changes the output
    DecodeParams(method="pld", num_pred=5, draft_policy="fixed"),
    DecodeParams(method="pld", num_pred=10, ngram_min=2, ngram_max=4),
    DecodeParams(method="jacobi", block=4),
    DecodeParams(method="jacobi", block=6, init="random", seed=3),
]


@pytest.mark.parametrize("params", GREEDY_CASES, ids=lambda p: f"{p.method}")
def test_greedy_methods_emit_exactly_the_baseline(engine, params):
    result = engine.run(PROMPT, params.replace(max_new_tokens=40))
    assert result.method.ids == result.baseline.ids
    assert result.summary.identical is True and result.summary.first_divergence is None
    assert len(result.method.ids) == 40
    assert set(result.method.kinds) <= set(EMIT_KINDS)


def test_speculative_drafts_are_both_accepted_and_rejected(engine):
    result = engine.run(PROMPT, DecodeParams(method="spec", gamma=4, max_new_tokens=40, draft_policy="fixed"))
    statuses = {row.status for it in result.method.iters for row in it.draft}
    assert {"acc", "rej"} <= statuses
    s = result.summary
    assert s.tau == round(40 / result.method.n_forward["main"], 3) and s.tau > 1
    assert 0 < s.extras["alpha_hat"] < 1 and s.extras["gamma_star"] in range(1, 11)
    # every draft row has helper and target probabilities and a top-5 per position
    it = result.method.iters[1]
    assert all(0 <= row.q <= 1 and 0 <= row.p <= 1 for row in it.draft)
    assert len(it.detail.p) == len(it.draft) + 1 and len(it.detail.q) == len(it.draft)
    assert all(len(pos) == 5 for pos in it.detail.p)


def test_kinds_follow_the_verification(engine):
    result = engine.run(PROMPT, DecodeParams(method="spec", gamma=3, max_new_tokens=30))
    for it in result.method.iters:
        kinds = [e.kind for e in it.emit]
        n = it.n_accepted
        assert kinds[:n] == ["acc"] * n
        if len(kinds) > n:
            assert kinds[n] == ("bonus" if n == len(it.draft) and it.draft else "fix" if it.draft else "ar")


def test_draft_step_never_recomputes_the_prefix(engine):
    result = engine.run(PROMPT, DecodeParams(method="spec", gamma=4, max_new_tokens=24))
    n_prompt = len(result.prompt_ids)
    # the helper processes the prompt once, then at most gamma + 1 positions per iteration
    helper_positions = result.method.n_positions["helper"]
    assert helper_positions <= n_prompt + 5 * len(result.method.iters)
    assert result.method.n_positions["main"] <= n_prompt + 5 * len(result.method.iters)


def test_sampling_is_reproducible_by_seed(engine):
    params = DecodeParams(method="spec", mode="sampling", temperature=0.9, seed=7, max_new_tokens=20)
    a = engine.run(PROMPT, params).method.ids
    b = engine.run(PROMPT, params).method.ids
    c = engine.run(PROMPT, params.replace(seed=8)).method.ids
    assert a == b and a != c


def test_budget_is_never_exceeded(engine):
    for n in (1, 2, 3, 7):
        for method in ("spec", "pld", "jacobi"):
            result = engine.run(PROMPT, DecodeParams(method=method, max_new_tokens=n, gamma=5, block=5))
            assert len(result.method.ids) == n == len(result.method.kinds) == len(result.method.tok_iter)
            assert result.method.finish == "length"


def test_stop_token_ends_the_run():
    family = tiny_family(fast=False)
    free = Engine(family).run(PROMPT, DecodeParams(method="ar", max_new_tokens=30)).method.ids
    stop = free[6]
    family.stop_ids = frozenset({stop})
    engine = Engine(family)
    for method in ("ar", "spec", "pld", "jacobi"):
        run = engine.run(PROMPT, DecodeParams(method=method, max_new_tokens=30)).method
        assert run.finish == "eos"
        assert run.ids == free[: free.index(stop) + 1]


def test_interleaved_runs_decode_their_baseline_alongside_every_time():
    engine = Engine(tiny_family(fast=False))
    for measured in (True, False):
        events = list(engine.stream(PROMPT, DecodeParams(method="pld", max_new_tokens=10)))
        phases = [(e.phase, e.paired) for e in events if isinstance(e, PhaseStarted)]
        # T(k) is measured after the first run only (once per context size), as a phase of its own
        assert phases == [("method", True), ("curve", False)] if measured else [("method", True)]
        assert events[-1].summary.pairing == "interleaved" and len(events[-1].baseline.ids) == 10
    assert engine.baselines_measured == 0  # nothing cached: each run timed its own


def test_the_cost_curve_is_a_phase_of_its_own_that_reports_each_forward_and_stops_on_a_cancel():
    """After the method's last token T(k) is measured (32 forwards): its own phase, a Progress per
    forward, so a UI can show the run done. A cancel midway keeps no curve (measured next time)
    and leaves the main cache holding the run's context."""
    from decoders.analysis.timing import CURVE_REPEATS, CURVE_WIDTHS
    from decoders.core.events import Progress

    total = CURVE_WIDTHS * CURVE_REPEATS
    engine = Engine(tiny_family(fast=False))
    params = DecodeParams(method="pld", max_new_tokens=10)
    events = list(engine.stream(PROMPT, params))
    at = next(i for i, e in enumerate(events) if isinstance(e, PhaseStarted) and e.phase == "curve")
    assert events[at].max_new_tokens == total
    assert not any(hasattr(e, "emit") for e in events[at:])  # every token came before it
    done = [e.tokens for e in events[at:] if isinstance(e, Progress) and e.phase == "curve"]
    assert done == list(range(1, total + 1))
    assert events[-1].summary.verify_cost_curve is not None

    fresh = Engine(tiny_family(fast=False))
    seen = []

    def cancelled() -> bool:
        return len(seen) >= 3  # three forwards of the curve, then escape

    result = None
    for event in fresh.stream(PROMPT, params, cancelled=cancelled):
        if isinstance(event, Progress) and event.phase == "curve":
            seen.append(event.tokens)
        result = event
    assert seen == [1, 2, 3] and isinstance(result, RunResult)
    assert result.method.finish != "cancelled"  # the run itself had ended: its tokens all stand
    assert result.summary.verify_cost_curve is None and fresh.known_cost_curve(len(result.prompt_ids)) is None
    assert len(fresh.main.held) == len(result.prompt_ids) + len(result.method.ids)


def test_sequential_baseline_is_measured_once_per_prompt_and_settings():
    engine = Engine(tiny_family(fast=False), pairing="sequential")
    events = list(engine.stream(PROMPT, DecodeParams(method="pld", max_new_tokens=10)))
    assert [e.cached for e in events if isinstance(e, PhaseStarted) and e.phase == "baseline"] == [False]
    for params in (DecodeParams(method="spec", gamma=2, max_new_tokens=10),
                   DecodeParams(method="jacobi", max_new_tokens=10)):
        events = list(engine.stream(PROMPT, params))
        assert [e.cached for e in events if isinstance(e, PhaseStarted) and e.phase == "baseline"] == [True]
    assert engine.baselines_measured == 1
    engine.run(PROMPT, DecodeParams(method="pld", max_new_tokens=11))
    assert engine.baselines_measured == 2
    engine.forget_baselines()  # measured again on the next run
    events = list(engine.stream(PROMPT, DecodeParams(method="pld", max_new_tokens=10)))
    assert [e.cached for e in events if isinstance(e, PhaseStarted) and e.phase == "baseline"] == [False]
    assert engine.baselines_measured == 1


def test_cancel_keeps_the_partial_run():
    engine = Engine(tiny_family(fast=False))
    seen = []
    result = None
    for event in engine.stream(PROMPT, DecodeParams(method="spec", max_new_tokens=40), cancelled=lambda: len(seen) >= 3):
        if isinstance(event, RunResult):
            result = event
        elif hasattr(event, "draft"):
            seen.append(event)
    assert result is not None and result.method.finish == "cancelled"
    assert len(result.method.iters) == 3
    assert result.summary.identical is True  # the partial output agrees with the baseline so far


def test_run_record_round_trips_through_json(engine, tmp_path):
    result = engine.run(PROMPT, DecodeParams(method="spec", gamma=3, max_new_tokens=12, draft_policy="fixed"))
    path = result.save(tmp_path / "run.json")
    again = RunResult.load(path)
    assert again.to_json() == result.to_json()
    data = json.loads(path.read_text())
    row = data["runs"]["method"]["iters"][0]["draft"][0]
    assert len(row) == 6 and row[5] in ("acc", "rej", "unv")


def test_prompt_uses_the_chat_template_unless_raw():
    engine = Engine(tiny_family(fast=False))
    chat = engine.prompt_ids("w5 w6", DecodeParams())
    raw = engine.prompt_ids("w5 w6", DecodeParams(chat_template=False))
    assert raw == [5, 6]
    assert len(chat) > len(raw) and chat[-2:] != raw  # wrapped in the chat format


def test_a_divergence_says_whether_it_is_a_near_tie_or_a_bug(engine, monkeypatch):
    """A verifier that accepts every draft changes the output; the summary names the token and
    the target's top-2 margin there, far above float noise, and calls it a bug."""
    import decoders.methods.jacobi as jacobi_module
    from decoders.methods.shared.verify import Verdict

    def accept_all(best, drafts):
        g = drafts.numel()
        ones = torch.ones(g)
        return Verdict(torch.tensor(g), best[g], ones, ones)

    monkeypatch.setattr(jacobi_module, "accept_prefix", accept_all)
    result = engine.run(PROMPT, DecodeParams(method="jacobi", block=4, max_new_tokens=20))
    s = result.summary
    assert s.identical is False and s.divergence["at"] == s.first_divergence
    assert s.divergence["margin"] > 1e-3 and "report it as a bug" in s.explanation
    assert s.divergence["baseline"] == result.baseline.tokens[s.first_divergence]


def test_the_verify_cost_curve_is_measured_once_per_context_and_reaches_the_summary(engine):
    first = engine.run(PROMPT, DecodeParams(method="pld", max_new_tokens=10)).summary
    curve = first.verify_cost_curve
    assert len(curve) == 16 and curve[0] == 1.0 and all(t > 0 for t in curve)
    again = engine.run(PROMPT, DecodeParams(method="pld", max_new_tokens=10, num_pred=4)).summary
    assert again.verify_cost_curve == curve  # cached for this context bucket: no second probe of widths
    assert len(engine.main.log) < 32  # this run's forwards and its probe, not 2 x 16 widths again
