"""Speculative decoding's hybrid draft (``--hybrid suffix``): each iteration verifies the suffix
trees' draft or the helper's, whichever has the larger expected accepted length (Arctic Inference's
rule). Greedy output equal to the baseline whoever drafted, the rule's arithmetic, the record saying
which drafted and why, and exact sampling with the two kinds of draft mixed in one run."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

import decoders.methods.speculative as spec_module
from decoders.backends.runner import KVRunner
from decoders.core.declarations import get_method
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.methods.shared.common import DecodeContext
from decoders.methods.shared.suffix_memory import memory_for, reset_memories
from decoders.methods.shared.suffix_policy import HybridChoice
from decoders.methods.shared.suffix_trees import SuffixMatch, one_hot_step
from decoders.records.details import TopK
from tests.engine.test_suffix import always_accept
from tests.support.bigram import bigram_family, marginals
from tests.support.engine import PROMPT, tiny_family


@pytest.fixture(autouse=True)
def fresh_memories():
    reset_memories()
    yield
    reset_memories()


def suffix_drafted(run) -> list:
    return [it for it in run.iters if isinstance(it.detail, SuffixMatch) and it.draft]


def helper_drafted(run) -> list:
    return [it for it in run.iters if it.draft and not isinstance(it.detail, SuffixMatch)]


# --- the rule ----------------------------------------------------------------------------------------
def test_the_suffix_draft_is_taken_only_when_its_expected_accepted_length_beats_the_helpers():
    choice = HybridChoice(None, learn_costs=False, cut=False)
    assert choice.alpha == pytest.approx(0.5)  # the Beta(1, 1) prior before any helper draft is judged
    assert choice.model_expected(4) == pytest.approx(0.5 + 0.25 + 0.125 + 0.0625)
    # an unjudged branch frequency is its own acceptance: 0.9 + 0.9 * 0.8 = 1.62 > 0.9375
    pick = choice.pick([0.9, 0.8], 4)
    assert (pick.take, pick.mine, pick.theirs) == (2, pytest.approx(1.62), pytest.approx(0.9375))
    assert pick.mine_rate is None  # Arctic's rule: lengths, no costs
    assert choice.pick([0.3], 4).take == 0  # a weak match loses to the helper: 0.3 < 0.9375
    # no helper draft this iteration (a plain step): any suffix draft with a chance beats none
    assert choice.pick([0.3], 0).take == 1
    assert choice.pick([], 4).take == 0
    for _ in range(20):  # the helper's drafts all accepted: its expectation climbs past the suffix's
        choice.observe_model(4, 4)
    assert choice.alpha > 0.95 and choice.pick([0.9, 0.8], 4).take == 0
    # and the suffix draft's own verdicts calibrate its branch frequencies
    for _ in range(30):
        choice.suffix.observe([0.9, 0.8], 2, 3, 0.0)
    assert choice.suffix_expected([0.9, 0.8]) > 1.9


def test_weighed_by_cost_a_free_suffix_draft_beats_a_longer_but_costly_helper_draft():
    choice = HybridChoice(None, learn_costs=False, cut=False)
    for _ in range(20):
        choice.observe_model(4, 4)  # a ≈ 0.95: the helper expects about 3.6 of 4
    verify = lambda k: 1.0 + 0.1 * (k - 1)  # noqa: E731
    assert choice.pick([0.9, 0.8], 4).take == 0  # by length alone the helper's 3.6 wins over 1.62
    # its 4 tokens at c = 0.6 cost 2.4 steps beside a verify of 1.4: (1 + 3.6) / 3.8 ≈ 1.2 tokens a step;
    # the suffix draft's (1 + 1.62) / 1.2 ≈ 2.2
    pick = choice.pick([0.9, 0.8], 4, (0.6, verify))
    assert pick.take == 2 and pick.mine_rate == pytest.approx(2.62 / 1.2)
    assert pick.theirs_rate == pytest.approx((1 + choice.model_expected(4)) / (4 * 0.6 + 1.4))
    # a nearly free helper (c = 0.01) wins again
    assert choice.pick([0.9, 0.8], 4, (0.01, verify)).take == 0


# --- greedy on the tiny model -------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["fixed", "adaptive"])
def test_greedy_hybrid_emits_exactly_the_baseline_with_both_drafts_taken(engine, policy):
    params = DecodeParams(method="spec", hybrid="suffix", draft_policy=policy, max_new_tokens=48)
    result = engine.run(PROMPT, params)
    assert result.method.ids == result.baseline.ids and result.summary.identical is True
    mine = suffix_drafted(result.method)
    assert result.summary.extras["suffix_drafted"] == len(mine)
    assert "+ suffix" in result.method.label
    if policy == "fixed":  # the adaptive choice reads this machine's timings: who drafts there varies
        assert mine  # the prompt repeats itself: the request's own tree drafts
        assert helper_drafted(result.method)  # and the helper where nothing matched


def test_a_memory_of_the_answer_drafts_most_tokens_and_the_record_says_who_drafted_and_why():
    engine = Engine(tiny_family(fast=False), pairing="sequential")
    params = DecodeParams(method="spec", hybrid="suffix", max_new_tokens=40, draft_policy="fixed")
    baseline = engine.run(PROMPT, params.replace(method="ar")).method.ids
    memory_for(engine.family, params.suffix_depth).add("another prompt", baseline)
    result = engine.run(PROMPT, params)
    assert result.method.ids == baseline
    mine = suffix_drafted(result.method)
    assert any(it.detail.source == "memory" for it in mine)
    assert result.summary.extras["from_suffix"] > 0.5 and result.summary.tau > 2
    for it in mine:
        assert it.draft_stop.startswith(f"the suffix trees drafted (a {it.detail.n}-token match in ")
        assert "expected accepted tokens against" in it.draft_stop
        assert all(row.q is None for row in it.draft)  # a one-hot draft has no helper probability
    for it in helper_drafted(result.method):
        assert isinstance(it.detail, TopK)  # the helper's drafts keep their top-k
        assert it.draft_stop.startswith("the helper drafted: ")
    assert "the suffix trees drafted in" in result.summary.explanation


def test_off_and_a_draft_tree_never_read_the_suffix_trees(engine):
    off = engine.run(PROMPT, DecodeParams(method="spec", max_new_tokens=24))
    tree = engine.run(PROMPT, DecodeParams(method="spec", hybrid="suffix", tree_width=2, max_new_tokens=24))
    for result in (off, tree):
        assert result.method.ids == result.baseline.ids and not suffix_drafted(result.method)
        assert "suffix_drafted" not in result.summary.extras
    assert "no hybrid: a tree" in tree.method.label
    method = get_method("spec")
    assert method.drafts_linearly(DecodeParams(method="spec"))
    assert not method.drafts_linearly(DecodeParams(method="spec", hybrid="suffix"))  # no theorem, no counterpart


# --- exact sampling ----------------------------------------------------------------------------------
V = 12
TEMPERATURE = 0.7
TOKENS, RUNS = 5, 1500
PROMPT_IDS = [5, 6, 7, 5, 6, 7, 5, 6, 7]  # repeats: the request's tree drafts after "7"


def position_counts(step=one_hot_step) -> tuple[np.ndarray, int, int]:
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(V, V, generator=gen) * 1.5
    helper = target + torch.randn(V, V, generator=gen)  # a helper that is often, not always, right
    family = bigram_family(target, helper)
    main, side = KVRunner(family.main), KVRunner(family.helper)
    method = get_method("spec")
    counts = np.zeros((TOKENS, V))
    by_suffix = by_helper = 0
    for seed in range(RUNS):
        params = DecodeParams(method="spec", hybrid="suffix", mode="sampling", temperature=TEMPERATURE, seed=seed,
                              max_new_tokens=TOKENS, record=False, draft_policy="fixed", gamma=2,
                              suffix_source="request", suffix_factor=2.0)
        main.reset()
        side.reset()
        run = method.run(DecodeContext(family, PROMPT_IDS, params, main, side, time.perf_counter))
        while True:
            try:
                next(run)
            except StopIteration as stop:
                out = stop.value
                break
        by_suffix += len(suffix_drafted(out))
        by_helper += len(helper_drafted(out))
        counts[np.arange(TOKENS), out.ids] += 1
    return counts, by_suffix, by_helper


def worst_pvalue(counts: np.ndarray) -> float:
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(V, V, generator=gen) * 1.5
    expected = marginals(target, PROMPT_IDS[-1], TOKENS, TEMPERATURE).numpy()
    return min(chisquare(row, row.sum() * exp).pvalue for row, exp in zip(counts, expected, strict=False))


@pytest.mark.slow
def test_sampling_with_both_drafts_mixed_emits_every_position_as_the_tempered_target_does():
    counts, by_suffix, by_helper = position_counts()
    assert by_suffix > RUNS / 2 and by_helper > RUNS / 2  # both kinds of draft verified, many times
    assert worst_pvalue(counts) > 1e-3


@pytest.mark.slow
def test_a_hybrid_that_accepts_the_suffix_draft_blindly_is_caught(monkeypatch):
    """Only the suffix draft's verify is broken: the helper's stays exact."""
    monkeypatch.setattr(spec_module, "one_hot_step", lambda b, T, drafts, gen, verify: one_hot_step(
        b, T, drafts, gen, always_accept))
    counts, by_suffix, _ = position_counts()
    assert by_suffix > RUNS / 2 and worst_pvalue(counts) < 1e-8
