"""The draft length at batch B from the cost model (`decoders.methods.batch.adaptive`): the pure
choice over made-up surfaces and acceptances, the per-row conditional acceptance it learns, and
batched prompt lookup under it keeping every row's batch-1 greedy output whatever K it picks.
Made-up numbers and a tiny in-memory model, seconds."""

from __future__ import annotations

import pytest

from decoders.backends.batched import BatchedLM
from decoders.methods.batch.adaptive import (
    EXPLORE_EVERY,
    BatchDraftPolicy,
    best_draft_length,
    expected_tokens,
    surface_cost,
)
from decoders.methods.batch.chain import decode_batch
from tests.backends.test_batched import PROMPTS, RightFor, greedy_alone
from tests.support.engine import peaked_model

FLAT = {1: [1.0] * 16, 4: [1.0] * 16}  # a wide forward as cheap as a narrow one
STEEP = {1: [1.0 + 1.0 * (k - 1) for k in range(1, 17)], 4: [4.0 * k for k in range(1, 17)]}


def test_expected_tokens_multiply_the_conditional_acceptances():
    assert expected_tokens([0.5, 0.5, 0.5], 0) == 1.0
    assert expected_tokens([0.5, 0.5, 0.5], 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert expected_tokens([1.0, 0.0, 1.0], 3) == 2.0  # nothing survives a sure rejection


def test_a_steep_surface_makes_plain_steps_win():
    cost = lambda w: surface_cost(STEEP, 4, w)  # noqa: E731
    k, rates = best_draft_length(cost, [[0.6] * 8] * 4, [8] * 4)
    assert k == 0 and rates[0] == pytest.approx(4 / 4.0) and rates[0] > max(rates[1:])


def test_a_flat_surface_with_high_acceptance_drafts_long():
    k, _ = best_draft_length(lambda w: surface_cost(FLAT, 4, w), [[0.95] * 8] * 4, [8] * 4)
    assert k == 8


def test_the_choice_is_between_and_counts_rows_without_a_draft():
    # T(B, w) = 1 + 0.4 (w - 1): at acceptance 0.9 for one row (the other has no draft and counts
    # its one token), the first drafted position pays and the second no longer does
    cost = lambda w: 1.0 + 0.4 * (w - 1)  # noqa: E731
    k, rates = best_draft_length(cost, [[0.9, 0.9, 0.9], [0.1] * 3], [3, 0])
    assert rates == pytest.approx([2.0, 2.9 / 1.4, 3.71 / 1.8, 4.439 / 2.2])
    assert k == 1
    assert best_draft_length(cost, [[0.9] * 3], [0]) == (0, [1.0])  # nothing to draft: a plain step
    # a draft that costs a forward per position never pays even on a flat surface
    assert best_draft_length(lambda w: 1.0, [[0.9] * 3], [3], draft_cost=1.0)[0] == 0


def test_the_surface_is_read_between_and_beyond_what_was_measured():
    surface = {1: [1.0, 1.2, 1.4], 4: [2.0, 3.0, 3.5]}
    assert surface_cost(surface, 1, 2) == 1.2
    assert surface_cost(surface, 2, 1) == pytest.approx(1.0 + (2.0 - 1.0) / 3)  # linear in B
    assert surface_cost(surface, 8, 1) == pytest.approx(2.0 + (2.0 - 1.0) * 4 / 3)  # beyond the largest B
    assert surface_cost(surface, 4, 5) == pytest.approx(3.5 + 0.5 * 2)  # beyond the widths, the last step on
    assert surface_cost({1: [1.0, 0.9, 1.3]}, 1, 2) == 1.0  # never cheaper for being wider
    assert surface_cost(None, 3, 3) == pytest.approx(1.3)  # the batch-1 policy's prior slope


def test_the_policy_learns_each_rows_conditional_acceptance():
    policy = BatchDraftPolicy(4, FLAT)
    assert policy.acceptance(7) == [0.5] * 4  # the prior before anything is measured
    policy.observe(7, drafted=4, accepted=2)  # positions 0, 1 accepted, 2 rejected, 3 never judged
    policy.observe(7, drafted=4, accepted=4)
    assert policy.acceptance(7) == [3 / 4, 3 / 4, 2 / 4, 2 / 3]
    assert policy.acceptance(8) == [0.5] * 4  # another row's own


def test_plain_steps_are_re_measured_with_a_short_draft():
    policy = BatchDraftPolicy(6, STEEP)
    ks = [policy.choose([0, 1, 2, 3], [6] * 4) for _ in range(EXPLORE_EVERY)]
    assert ks == [0] * (EXPLORE_EVERY - 1) + [2]
    assert policy.choose([0, 1], [0, 0]) == 0  # no draft at all is no reason to explore


@pytest.fixture(scope="module")
def model():
    return peaked_model()


@pytest.mark.parametrize("surface,short", [(STEEP, True), (FLAT, False)])
def test_batched_prompt_lookup_keeps_the_batch_1_output_whatever_k_it_picks(model, surface, short):
    policy = BatchDraftPolicy(6, surface)
    run = decode_batch(BatchedLM(model), PROMPTS, 20, "pld", gamma=6, policy=policy)
    for prompt, row in zip(PROMPTS, run.rows, strict=True):
        assert row.out == greedy_alone(model, prompt, 20)
    assert len(run.draft_lengths) == run.forwards - 1  # one K per iteration after the prefill
    if short:  # plain steps, a short re-measuring draft now and then
        assert max(run.draft_lengths) <= 2 and run.draft_lengths.count(0) >= len(run.draft_lengths) // 2
    else:
        assert max(run.draft_lengths) > 2


def test_the_chosen_k_follows_the_acceptance_each_row_shows(model):
    expected = {tuple(p): greedy_alone(model, p, 40) for p in PROMPTS}

    def make(seq):  # every row drafts 6 right tokens then a wrong one
        prompt = next(p for p in PROMPTS if seq[: len(p)] == p and len(seq) == len(p) + 1)
        return RightFor(seq, expected[tuple(prompt)], 6)

    cost = {4: [1.0 + 0.05 * (k - 1) for k in range(1, 17)]}  # nearly flat: a sure draft pays in full
    run = decode_batch(BatchedLM(model), PROMPTS, 40, make=make, policy=BatchDraftPolicy(8, cost))
    for prompt, row in zip(PROMPTS, run.rows, strict=True):
        assert row.out == expected[tuple(prompt)]
    # at the prior (0.5 a position) 4 (2 - 0.5^K) / (1 + 0.05 K) is best at K = 3; K then grows as
    # every row's drafts pass, up to the six right ones (the last iteration: the tokens left)
    assert run.draft_lengths == [3, 4, 5, 5, 6, 6, 3]
