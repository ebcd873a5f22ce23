"""The finite-budget prediction of a chain draft at batch B (`decoders.analysis.finite`, issue 39
item 5): exact against hand-computed tiny cases (in fractions), and within a few standard errors
of a seeded 20,000-run simulation that drafts with the synthetic draft's own rule
(`decoders.methods.synthetic.draft_chain`) and keeps each row's right prefix as `decode_batch` does."""

from __future__ import annotations

import random
from fractions import Fraction
from statistics import mean, stdev

import pytest

from decoders.analysis.finite import (
    batch_cost,
    expected_forwards,
    expected_max,
    finite_speedup,
    forward_cdf,
    iteration_tokens,
    surface_cost,
)
from decoders.analysis.theory import chain_speedup, expected_tokens
from decoders.methods.synthetic import draft_chain

A = Fraction(7, 10)
#: A made-up cost surface, exact: T(B, k) for B = 1..3, k = 1..4.
T = {1: [Fraction(1), Fraction(3, 2), Fraction(2), Fraction(5, 2)],
     2: [Fraction(6, 5), Fraction(7, 4), Fraction(9, 4), Fraction(11, 4)],
     3: [Fraction(3, 2), Fraction(2), Fraction(5, 2), Fraction(3)]}


def t(batch: int, k: int) -> Fraction:
    return T[batch][k - 1]


def test_one_iteration_yields_its_right_prefix_plus_one_capped_by_the_budget():
    assert iteration_tokens(A, 3, 10) == [Fraction(3, 10), A * Fraction(3, 10), A ** 2 * Fraction(3, 10), A ** 3]
    assert iteration_tokens(A, 3, 2) == [Fraction(3, 10), A]  # one draft: the budget's last token is the target's
    assert iteration_tokens(A, 3, 1) == [1]  # nothing drafted
    assert sum(iteration_tokens(A, 5, 4)) == 1


@pytest.mark.parametrize("gamma", [1, 2, 5])
def test_tiny_budgets_take_the_hand_computed_forwards(gamma):
    assert expected_forwards(0, A, gamma) == 0
    assert expected_forwards(1, A, gamma) == 1  # one token: one forward whatever is drafted
    assert expected_forwards(2, A, gamma) == 2 - A  # one draft: right (one forward) or wrong (two)
    assert forward_cdf(2, A, gamma) == [0, A, 1]


def test_three_tokens_take_the_hand_computed_forwards():
    # γ = 1: a right draft leaves one token, a wrong one two
    assert expected_forwards(3, A, 1) == 1 + A * 1 + (1 - A) * (2 - A)
    # γ = 2: wrong at once leaves two, wrong second leaves one, both right ends it
    assert expected_forwards(3, A, 2) == 1 + (1 - A) * (2 - A) + A * (1 - A) * 1


def test_a_batch_waits_for_its_slowest_row():
    # two rows of two tokens, γ = 1: a second forward unless both drafts were right
    assert expected_forwards(2, A, 1, rows=2) == 1 + (1 - A ** 2)
    assert expected_max([[0, A, 1], [0, A, 1]]) == 2 - A ** 2
    assert expected_max([[0, 1], [0, Fraction(1, 2), 1]]) == Fraction(3, 2)  # counts of different lengths
    assert expected_forwards(9, A, 3, rows=4) > expected_forwards(9, A, 3, rows=1)


def test_the_cost_counts_the_rows_still_active_and_the_widest_draft():
    c = Fraction(1, 20)
    # forward 1: both rows, one draft each; forward 2: the rows whose draft was wrong, nothing drafted
    hand = (t(2, 2) / t(2, 1) + c + 2 * A * (1 - A) * t(1, 1) / t(2, 1) + (1 - A) ** 2 * t(2, 1) / t(2, 1))
    assert batch_cost(2, A, 1, c, 2, t) == hand
    assert finite_speedup(2, A, 1, c, 2, t) == 2 / hand
    # one row, one token: one forward of one position, nothing drafted (no draft cost)
    assert batch_cost(1, A, 4, c, 1, t) == 1
    assert finite_speedup(0, A, 4, c, 1, t) == 1


def test_a_long_budget_at_batch_1_approaches_theorem_3_8_from_below():
    flat = surface_cost({1: [1.0] * 9})
    for alpha, gamma in ((0.5, 3), (0.8, 4), (0.9, 8)):
        long = finite_speedup(600, alpha, gamma, 0.0, 1, flat)
        assert long < expected_tokens(alpha, gamma)
        assert long == pytest.approx(expected_tokens(alpha, gamma), rel=0.01)
    # with a cost: the same limit as the cost-aware theorem
    curve = surface_cost({1: [1.0, 1.3, 1.5, 1.8, 2.0]})
    assert finite_speedup(600, 0.8, 4, 0.05, 1, curve) == pytest.approx(chain_speedup([0.8], 4, 0.05, 2.0), rel=0.01)
    # a short budget falls well short of it (the budget cuts the last chain)
    assert finite_speedup(31, 0.9, 8, 0.0, 1, flat) < 0.92 * expected_tokens(0.9, 8)


def test_the_surface_is_interpolated_between_measured_batch_sizes():
    cost = surface_cost({1: [1.0, 2.0], 4: [1.6, 3.2]})
    assert cost(1, 2) == 2.0 and cost(4, 1) == 1.6
    assert cost(2, 1) == pytest.approx(1.2) and cost(3, 2) == pytest.approx(2.8)
    assert cost(8, 1) == 1.6  # beyond the largest: the largest's
    assert cost(1, 5) == 2.0  # past the widths measured: the widest's
    with pytest.raises(ValueError):
        surface_cost({})


def simulate(tokens: int, alpha: float, gamma: int, rows: int, c: float, cost, runs: int, seed: int):
    """Each run: ``rows`` rows, each with a reference of ``tokens`` + 1 tokens and its first token
    from the prefill, drafted by `draft_chain` and verified as `decode_batch` verifies; the
    forwards until every row is done and their cost in T(rows, 1) as `batch_cost` counts it."""
    vocab = 50
    forwards, costs = [], []
    rng = random.Random(seed)
    for _ in range(runs):
        refs = [[rng.randrange(vocab) for _ in range(tokens + 1)] for _ in range(rows)]
        rngs = [random.Random(rng.getrandbits(32)) for _ in range(rows)]
        outs = [ref[:1] for ref in refs]
        active = [r for r in range(rows) if tokens > 0]
        n_forwards, spent = 0, 0.0
        while active:
            drafts = [draft_chain(refs[r], len(outs[r]), min(gamma, tokens + 1 - len(outs[r]) - 1), [alpha] * gamma,
                                  rngs[r], vocab) for r in active]
            width = max(len(d) for d in drafts)
            spent += cost(len(active), width + 1) / cost(rows, 1) + c * width
            n_forwards += 1
            still = []
            for r, d in zip(active, drafts, strict=True):
                at = len(outs[r])
                n = 0
                while n < len(d) and d[n] == refs[r][at + n]:
                    n += 1
                outs[r] += refs[r][at: at + n + 1]
                if len(outs[r]) < tokens + 1:
                    still.append(r)
            active = still
        forwards.append(n_forwards)
        costs.append(spent)
    return forwards, costs


@pytest.mark.parametrize(("tokens", "alpha", "gamma", "rows"), [(12, 0.7, 3, 1), (12, 0.7, 3, 3), (20, 0.9, 6, 4)])
def test_the_dynamic_program_agrees_with_a_20000_run_simulation(tokens, alpha, gamma, rows):
    cost = surface_cost({1: [1.0, 1.4, 1.7, 1.9, 2.2, 2.4, 2.6], 4: [1.5, 1.8, 2.1, 2.4, 2.7, 3.0, 3.3]})
    forwards, costs = simulate(tokens, alpha, gamma, rows, 0.05, cost, 20_000, seed=39)
    # seeded: the same draws every run; four standard errors of the mean is a tight and fixed bound
    for sample, exact in ((forwards, expected_forwards(tokens, alpha, gamma, rows)),
                          (costs, batch_cost(tokens, alpha, gamma, 0.05, rows, cost))):
        error = stdev(sample) / len(sample) ** 0.5
        assert abs(mean(sample) - exact) < 4 * error
        assert abs(mean(sample) - exact) < 0.01 * exact
