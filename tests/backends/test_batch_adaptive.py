"""The draft length at batch B from the cost model (`decoders.methods.batch.adaptive`): the pure
choice over made-up surfaces and acceptances, the per-row conditional acceptance it learns, and
batched prompt lookup under it keeping every row's batch-1 greedy output whatever K it picks.
Made-up numbers and a tiny in-memory model, seconds."""

from __future__ import annotations

import pytest

from decoders.backends.batched import BatchedLM
from decoders.methods.batch.adaptive import (
    EXPLORE_EVERY,
    EXPLORE_K,
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
    # each position shrunk toward the one before it with the prior's weight (2): (2 + 2 * 0.5) / 4,
    # (2 + 2 * 3/4) / 4, (1 + 2 * 7/8) / 4, (1 + 2 * 11/16) / 3
    assert policy.acceptance(7) == pytest.approx([3 / 4, 7 / 8, 11 / 16, 19 / 24])
    assert policy.acceptance(8) == [0.5] * 4  # another row's own


def test_plain_steps_are_re_measured_with_a_short_draft():
    policy = BatchDraftPolicy(6, STEEP)
    ks = [policy.choose([0, 1, 2, 3], [6] * 4) for _ in range(EXPLORE_EVERY)]
    assert ks == [0] * (EXPLORE_EVERY - 1) + [2]
    # while drafting still does not pay, each re-measuring draft waits twice as long, up to four times
    ks = [policy.choose([0, 1, 2, 3], [6] * 4) for _ in range(16 + 32 + 32)]
    explored = [i + 1 for i, k in enumerate(ks) if k]
    assert explored == [16, 48, 80] and set(ks) == {0, 2}
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
    # at the prior (0.5 a position) 4 (2 - 0.5^K) / (1 + 0.05 K) is best at K = 3; once every row's
    # three pass, the positions no draft has reached yet are expected to pass as the third did, so K
    # jumps to 7 (six right tokens and the wrong seventh, which at 0.05 a position still pays on
    # this nearly flat surface); the last iteration drafts the tokens left
    assert run.draft_lengths == [3, 7, 7, 7, 7, 6]


# --- a model draft: K chosen before it drafts, its cost measured in the run ---------------------------
def test_a_model_drafts_cost_is_measured_and_a_costly_draft_is_switched_off():
    policy = BatchDraftPolicy(4, FLAT, learn_draft_cost=True)
    assert policy.choose([0, 1], [4, 4]) == 4  # nothing judged yet: a full draft measures c and acceptance
    policy.observe(0, 4, 4)
    policy.observe(1, 4, 4)
    # a verify forward of 5 positions over 2 rows at T = 1.0 took 0.1 s: one position is 0.1 s; the
    # draft's 4 steps took 1.2 s, 0.3 s a step: c = 3 one-position steps per drafted position
    policy.observe_times(2, 5, 0.1, 4, 1.2)
    assert policy.cost_per_draft == pytest.approx(3.0)
    assert policy.choose([0, 1], [4, 4]) == 0  # even sure drafts cost more than they yield
    cheap = BatchDraftPolicy(4, FLAT, learn_draft_cost=True)
    cheap.observe(0, 4, 4)
    cheap.observe_times(1, 5, 0.1, 4, 0.02)  # c = 0.05
    assert cheap.cost_per_draft == pytest.approx(0.05) and cheap.choose([0], [4]) == 4
    assert BatchDraftPolicy(4, FLAT, draft_cost=0.5).cost_per_draft == 0.5  # not learned: as given


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Timed:
    """The target, each forward one (fake) second."""

    def __init__(self, lm, clock):
        self.lm, self.clock = lm, clock

    def step(self, new):
        self.clock.t += 1.0
        return self.lm.step(new)

    def __getattr__(self, name):
        return getattr(self.lm, name)


class Priced:
    """A model draft whose every drafted step costs ``each`` (fake) seconds."""

    def __init__(self, draft, clock, each):
        self.draft, self.clock, self.each = draft, clock, each
        self.steps: list[int] = []

    def propose(self, seqs, budgets):
        out = self.draft.propose(seqs, budgets)
        steps = max((len(d) for d in out), default=0)
        self.steps.append(steps)
        self.clock.t += self.each * steps
        return out

    def __getattr__(self, name):
        return getattr(self.draft, name)


@pytest.mark.parametrize("each,drafts", [(3.0, False), (0.05, True)], ids=["costly", "cheap"])
def test_a_model_draft_at_batch_b_drafts_only_what_its_measured_cost_pays_for(model, each, drafts):
    """The target drafting for itself: every draft is accepted. A draft step costing three target
    forwards never pays, so after its first full draft the batch takes plain steps (drafting no
    step at all) with a short re-measuring draft now and then; a nearly free one drafts in full."""
    from decoders.methods.batch.model_draft import ModelDraft

    clock = FakeClock()
    draft = Priced(ModelDraft(BatchedLM(model), 4), clock, each)
    flat = {1: [1.0] * 16, 4: [1.0] * 16}
    run = decode_batch(Timed(BatchedLM(model), clock), PROMPTS, 30, "spec", clock=clock, draft=draft,
                       policy=BatchDraftPolicy(4, flat, learn_draft_cost=True))
    for prompt, row in zip(PROMPTS, run.rows, strict=True):
        assert row.out == greedy_alone(model, prompt, 30)
    assert draft.steps == run.draft_lengths  # the draft ran only the steps K asked for
    assert run.draft_lengths[0] == 4
    if drafts:
        assert min(run.draft_lengths[:-1]) == 4
    else:
        assert run.draft_lengths[1:].count(0) >= len(run.draft_lengths) // 2
        assert max(run.draft_lengths[1:]) == EXPLORE_K
