"""Sampling with a trained head is exact: over seeded runs, the tokens a speculative run with an
EAGLE-3 head (its reduced draft vocabulary, d2t) writes at each position follow the target's own
distribution, computed exactly by enumerating the first token. Linear chains and the adaptive length."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from decoders.backends.runner import KVRunner
from decoders.core.declarations import get_method
from decoders.core.params import DecodeParams
from decoders.methods.shared.common import DecodeContext
from tests.engine.test_head_drafts import head_family
from tests.support.engine import VOCAB

PROMPT_IDS = [10, 11, 12, 13, 14, 10, 11]
TEMPERATURE = 4.0  # flattens the peaked tiny target and the random head so that drafts are often accepted
RUNS = 700


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def exact(model) -> np.ndarray:
    """[2, V]: the target's tempered distribution of the first token and, over it, of the second (the
    run writes 4, so that the second is drafted: a draft never covers a run's last token)."""
    with torch.no_grad():
        first = torch.softmax(model(torch.tensor([PROMPT_IDS])).logits[0, -1] / TEMPERATURE, -1)
        rows = torch.tensor([PROMPT_IDS + [t] for t in range(VOCAB)])
        second = torch.softmax(model(rows).logits[:, -1] / TEMPERATURE, -1)
    return torch.stack([first, first @ second]).double().numpy()


def pvalue(row: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square over the tokens expected at least 5 times, the rest pooled in one cell."""
    expected = probs * row.sum()
    big = expected >= 5
    observed, wanted = row[big], expected[big]
    if expected[~big].sum() > 0:
        observed, wanted = np.append(observed, row[~big].sum()), np.append(wanted, expected[~big].sum())
    return chisquare(observed, wanted * observed.sum() / wanted.sum()).pvalue


def counts(family, policy: str) -> tuple[np.ndarray, int]:
    main, draft = KVRunner(family.main), KVRunner(family.helper)
    method = get_method("spec")
    out = np.zeros((2, VOCAB))
    accepted = 0
    for seed in range(RUNS):
        params = DecodeParams(method="spec", mode="sampling", temperature=TEMPERATURE, seed=seed, gamma=3,
                              max_new_tokens=4, draft_policy=policy)
        main.reset()
        draft.reset()
        gen = method.run(DecodeContext(family, PROMPT_IDS, params, main, draft, time.perf_counter))
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                run = stop.value
                break
        out[[0, 1], run.ids[:2]] += 1
        accepted += sum(it.n_accepted for it in run.iters)  # of the 4 tokens' iterations
    return out, accepted


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fixed", "adaptive"])
def test_sampling_with_an_eagle3_head_writes_the_targets_distribution(tmp_path, policy):
    family = head_family(tmp_path, "eagle3", fast=True)
    seen, accepted = counts(family, policy)
    probs = exact(family.main_model)
    assert accepted > RUNS // 10  # the head's drafts were accepted: the verifier, not only the residual, wrote
    assert min(pvalue(row, p) for row, p in zip(seen, probs, strict=True)) > 1e-3


@pytest.mark.slow
def test_a_verifier_that_resamples_from_p_after_a_rejection_is_caught(tmp_path, monkeypatch):
    """The check above can fail: after a rejection, a token from p instead of the residual max(p - q, 0)."""
    import decoders.methods.speculative as speculative_module
    from tests.engine.test_sampling_e2e import residual_from_p

    monkeypatch.setattr(speculative_module, "verify_sampling", residual_from_p)
    family = head_family(tmp_path, "eagle3", fast=True)
    seen, _ = counts(family, "fixed")
    assert min(pvalue(row, p) for row, p in zip(seen, exact(family.main_model), strict=True)) < 1e-6
