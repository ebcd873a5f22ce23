"""Exact speculative sampling, end to end through the speculative method: every emitted position,
the bonus included, at a temperature other than 1, is distributed as the target's own samples;
and each plausible broken verifier fails the same check.

The models are bigram tables (`tests.support.bigram`), so the exact distribution of every position is
known and thousands of runs take seconds. With gamma 3 and 4 tokens, position 3 is the bonus
token whenever every draft of the first iteration passes.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

import decoders.methods.speculative as speculative_module
from decoders.backends.runner import KVRunner
from decoders.backends.sampling import sample
from decoders.core.declarations import get_method
from decoders.core.params import DecodeParams
from decoders.methods.shared.common import DecodeContext
from decoders.methods.shared.verify import Verdict, verify_sampling
from tests.support.bigram import bigram_family, marginals

V = 12
TEMPERATURE = 0.7
GAMMA, TOKENS, RUNS = 3, 4, 1500  # at 1500 runs each broken verifier below reads p < 1e-20
PROMPT_IDS = [5, 6, 7]

pytestmark = pytest.mark.slow  # each test decodes 1500 seeded runs: seconds even on bigram tables


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny ops: a second thread only adds hand-over cost (and contention on a shared machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tables():
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(V, V, generator=gen) * 1.5
    helper = target + torch.randn(V, V, generator=gen) * 1.2  # accepted often, rejected often
    return target, helper


def position_counts(runs: int = RUNS, policy: str = "fixed", tokens: int = TOKENS,
                    draft_vocab: int | None = None) -> np.ndarray:
    """Histogram [tokens, V] of the token emitted at each position over ``runs`` seeded runs.
    ``draft_vocab``: the helper drafts from its first that many ids only (the others at -inf, as a
    trained head's reduced draft vocabulary gives them)."""
    target, helper = tables()
    if draft_vocab is not None:
        helper = helper.clone()
        helper[:, draft_vocab:] = float("-inf")
    family = bigram_family(target, helper)
    # A helper a tenth of the target's size: the adaptive policy then drafts 1, 2 or 3 tokens,
    # stopping on the helper's confidence (about 3 in 4 first-iteration drafts end that way).
    family.helper.weight_bytes = family.main.weight_bytes // 10
    main, draft = KVRunner(family.main), KVRunner(family.helper)
    method = get_method("spec")
    counts = np.zeros((tokens, V))
    for seed in range(runs):
        params = DecodeParams(method="spec", mode="sampling", temperature=TEMPERATURE, seed=seed, gamma=GAMMA,
                              max_new_tokens=tokens, record=False, draft_policy=policy)
        main.reset()
        draft.reset()
        gen = method.run(DecodeContext(family, PROMPT_IDS, params, main, draft, time.perf_counter))
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                ids = stop.value.ids
                break
        counts[np.arange(tokens), ids] += 1
    return counts


def worst_pvalue(counts: np.ndarray) -> float:
    expected = marginals(tables()[0], PROMPT_IDS[-1], len(counts), TEMPERATURE).numpy()
    return min(chisquare(row, row.sum() * exp).pvalue for row, exp in zip(counts, expected, strict=False))


def bonus_from_q(p, q, drafts, gen):
    v = verify_sampling(p, q, drafts, gen)
    g = drafts.numel()
    bonus = sample(q[g - 1:g], gen)[0]
    return Verdict(v.n_accepted, torch.where(v.n_accepted == g, bonus, v.next_token), v.acc_prob, v.beta)


def bonus_from_wrong_position(p, q, drafts, gen):
    v = verify_sampling(p, q, drafts, gen)
    g = drafts.numel()
    bonus = sample(p[g - 1:g], gen)[0]
    return Verdict(v.n_accepted, torch.where(v.n_accepted == g, bonus, v.next_token), v.acc_prob, v.beta)


def untempered_target(p, q, drafts, gen):
    """p without the temperature: softmax(z / T) ** T renormalised is softmax(z)."""
    raw = p.pow(TEMPERATURE)
    return verify_sampling(raw / raw.sum(-1, keepdim=True), q, drafts, gen)


def residual_from_p(p, q, drafts, gen):
    v = verify_sampling(p, q, drafts, gen)
    fixes = sample(p, gen)
    return Verdict(v.n_accepted, torch.where(v.n_accepted < drafts.numel(), fixes[v.n_accepted], v.next_token),
                   v.acc_prob, v.beta)


@pytest.mark.parametrize("policy,tokens", [("fixed", TOKENS), ("adaptive", 8)])
def test_every_emitted_position_follows_the_tempered_target(policy, tokens):
    """The adaptive draft length stops drafts on the helper's confidence alone: still exact. Its
    first draft is always full, so it runs longer, where the policy's decisions start to vary."""
    counts = position_counts(policy=policy, tokens=tokens)
    assert worst_pvalue(counts) > 1e-3


def test_a_reduced_draft_vocabulary_stays_exact():
    """q is 0 outside a head's draft vocabulary: those tokens only ever come from the residual."""
    counts = position_counts(runs=1000, draft_vocab=V // 2)
    assert worst_pvalue(counts) > 1e-3
    assert counts[:, V // 2:].sum() > 0  # the target still writes the tokens the draft cannot


@pytest.mark.parametrize("broken", [bonus_from_q, bonus_from_wrong_position, untempered_target, residual_from_p])
def test_a_broken_verifier_is_caught(monkeypatch, broken):
    monkeypatch.setattr(speculative_module, "verify_sampling", broken)
    assert worst_pvalue(position_counts()) < 1e-8
