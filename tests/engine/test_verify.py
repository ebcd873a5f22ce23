"""Speculative sampling must emit tokens distributed exactly as the target's own samples."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from decoders.backends.sampling import make_generator, sample
from decoders.methods.shared.verify import Verdict, accept_prefix, verify_sampling

V = 6
P = torch.tensor([[0.40, 0.25, 0.15, 0.10, 0.06, 0.04],
                  [0.05, 0.05, 0.50, 0.20, 0.10, 0.10],
                  [0.30, 0.30, 0.10, 0.10, 0.10, 0.10]])
Q = torch.tensor([[0.10, 0.50, 0.05, 0.05, 0.20, 0.10],
                  [0.20, 0.20, 0.20, 0.20, 0.10, 0.10]])


def broken_verify(p, q, drafts, gen) -> Verdict:
    """A plausible bug: on rejection, resample from p instead of the residual max(0, p - q)."""
    v = verify_sampling(p, q, drafts, gen)
    fix = sample(p[:1], gen)[0]
    nxt = torch.where(v.n_accepted == 0, fix, v.next_token)
    return Verdict(v.n_accepted, nxt, v.acc_prob, v.beta)


def emitted_blocks(verify, trials: int, seed: int):
    """The tokens each of many independent draft-and-verify rounds emits."""
    gen = make_generator(seed, "cpu")
    for _ in range(trials):
        drafts = sample(Q, gen)
        v = verify(P, Q, drafts, gen)
        yield drafts[: int(v.n_accepted)].tolist() + [int(v.next_token)]


def first_tokens(verify, trials: int, seed: int = 0) -> np.ndarray:
    """Histogram of the first emitted token."""
    return np.bincount([block[0] for block in emitted_blocks(verify, trials, seed)], minlength=V).astype(float)


def second_tokens_given_first(verify, trials: int, first: int, seed: int = 1) -> np.ndarray:
    """Histogram of the second emitted token among rounds whose first token is ``first``."""
    seconds = [block[1] for block in emitted_blocks(verify, trials, seed) if len(block) >= 2 and block[0] == first]
    return np.bincount(seconds, minlength=V).astype(float)


def test_first_token_follows_target_distribution():
    counts = first_tokens(verify_sampling, 6000)
    stat = chisquare(counts, counts.sum() * P[0].numpy())
    assert stat.pvalue > 1e-3, (counts / counts.sum(), P[0])
    tv = 0.5 * np.abs(counts / counts.sum() - P[0].numpy()).sum()
    assert tv < 0.03


def test_second_token_follows_target_distribution():
    # P[1] is the target's distribution for position 2 whatever came first (fixed rows here)
    counts = second_tokens_given_first(verify_sampling, 8000, first=1)
    assert counts.sum() > 1000
    assert chisquare(counts, counts.sum() * P[1].numpy()).pvalue > 1e-3


def test_broken_verifier_is_flagged():
    counts = first_tokens(broken_verify, 6000)
    assert chisquare(counts, counts.sum() * P[0].numpy()).pvalue < 1e-6


def test_acceptance_probability_is_min_one_p_over_q():
    drafts = torch.tensor([1, 2])
    v = verify_sampling(P, Q, drafts, make_generator(0, "cpu"))
    expected = torch.clamp(P[torch.arange(2), drafts] / Q[torch.arange(2), drafts], max=1.0)
    assert torch.allclose(v.acc_prob, expected)
    assert torch.allclose(v.beta, torch.minimum(P[:2], Q).sum(-1))


@pytest.mark.parametrize("drafts,n,nxt", [([0, 2], 2, 0), ([0, 3], 1, 2), ([1, 2], 0, 0)])
def test_greedy_accepts_the_longest_matching_prefix(drafts, n, nxt):
    logits = torch.log(P)
    v = accept_prefix(logits.argmax(-1), torch.tensor(drafts))
    assert int(v.n_accepted) == n
    assert int(v.next_token) == nxt
