"""The tree budget keeps the nodes whose chance pays for their position, and a prompt-lookup tree
keeps the linear draft and adds alternatives only where they pay."""

from __future__ import annotations

import pytest

from decoders.backends.tree import TokenTree
from decoders.methods.shared.draft_policy import AdaptiveDraftLength
from decoders.methods.shared.tree_budget import (
    ALT_PRIOR,
    AlternativeRates,
    budget,
    chances,
    child_ranks,
    path_nodes,
    prune,
    subtree,
)

STEEP = [1.0, 1.45, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1, 2.2, 2.3, 2.4, 2.5]  # a CPU's T(k)
FLAT = [1.0] * 16  # a GPU's


def test_child_ranks_count_siblings_in_order():
    assert child_ranks([-1, 0, -1, 0, 1, -1]) == [0, 0, 1, 1, 0, 2]


def test_chances_multiply_along_the_path():
    alternatives = AlternativeRates()  # the prior: an alternative is the accepted one 1 time in 14
    parents = [-1, 0, 1, -1, 3]  # a chain of three, and a rank-1 alternative at the root with a child
    got = chances(parents, [0.9, 0.8, 0.7, 0.5, 0.6], alternatives)
    assert ALT_PRIOR[0] / sum(ALT_PRIOR) == pytest.approx(1 / 14)
    assert got == pytest.approx([0.9, 0.72, 0.504, 1 / 14, 0.6 / 14])


@pytest.mark.parametrize("curve", [STEEP, FLAT, [1.0, 1.1, 1.9, 2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7]])
@pytest.mark.parametrize("a", [0.1, 0.4, 0.6, 0.8, 0.95])
def test_one_chain_is_pruned_to_the_linear_draft_length(curve, a):
    """With one branch the budget is the linear policy: the same objective, the same length."""
    policy = AdaptiveDraftLength(10, cost_curve=curve)
    policy._acc[2] = [a * 100, (1 - a) * 100]
    chain = list(range(-1, 9))  # ten nodes, each under the one before
    kept = prune(chain, chances(chain, [a] * 10, AlternativeRates()), policy.cost)
    assert kept == list(range(policy.choose(2, 10)))


def test_alternatives_are_added_only_where_they_pay():
    parents = [-1, 0, -1]  # a two-token chain and one alternative at the root
    alternatives = AlternativeRates()
    chance = chances(parents, [0.9, 0.9, 0.5], alternatives)  # the alternative: 1 in 14
    # flat costs: everything pays
    assert prune(parents, chance, lambda n: 1.0, base=[0, 1]) == [0, 1, 2]
    # a fourth position costing a quarter step more: 2.71 tokens / 1.5 beats 2.78 / 1.75
    assert prune(parents, chance, lambda n: 1.0 + 0.25 * (n - 1), base=[0, 1]) == [0, 1]
    # nearly free (0.01 of a step): 2.78 / 1.03 beats 2.71 / 1.02
    assert prune(parents, chance, lambda n: 1.0 + 0.01 * (n - 1), base=[0, 1]) == [0, 1, 2]
    # the base is kept whatever it costs
    assert prune(parents, chance, lambda n: float(n) ** 3, base=[0]) == [0]


def test_alternative_rates_learn_from_the_accepted_path():
    rates = AlternativeRates()
    parents = [-1, 0, -1, 0]  # chain 0 -> 1; node 2 a root alternative; node 3 an alternative under 0
    for _ in range(20):
        rates.observe(parents, [0, 3])  # the chain's first token, then the alternative under it
    # node 3 accepted 20 times, node 2 passed over 20 times, on the prior's pseudo-counts
    accepted, passed = ALT_PRIOR
    assert rates.rate(1) == pytest.approx((accepted + 20) / (accepted + passed + 40))
    before = rates.rate(1)
    for _ in range(20):
        rates.observe(parents, [])  # nothing accepted: only the root's alternative was judged
    assert rates.rate(1) < before
    assert rates.rate(2) == pytest.approx(ALT_PRIOR[0] / sum(ALT_PRIOR))  # no rank-2 alternative seen: the prior


def test_an_alternative_under_a_refused_node_teaches_nothing():
    rates = AlternativeRates()
    rates.observe([-1, 0, 0], [])  # node 2 hangs under node 0, which was refused: never judged
    assert rates.rate(1) == pytest.approx(ALT_PRIOR[0] / sum(ALT_PRIOR))


def test_path_nodes_number_as_the_trie_does():
    paths = [[5, 6, 7], [5, 8], [9]]
    tree = TokenTree.from_paths(paths)
    nodes = path_nodes(paths)
    assert nodes == [[0, 1, 2], [0, 3], [4]]
    assert [[tree.tokens[n] for n in branch] for branch in nodes] == paths


def test_subtree_renumbers_and_refuses_an_orphan():
    tree = TokenTree.from_paths([[5, 6, 7], [5, 8], [9]])
    sub = subtree(tree, [0, 1, 3])
    assert sub.tokens == (5, 6, 8) and sub.parents == (-1, 0, 0)
    with pytest.raises(ValueError, match="parent 1 is not"):
        subtree(tree, [0, 2])


def test_the_lookup_tree_keeps_the_linear_draft_and_drops_alternatives_that_do_not_pay():
    paths = [[1, 2, 3, 4], [7, 8, 9], [1, 2, 5]]
    tree = TokenTree.from_paths(paths)
    cliff = [1.0, 1.2, 1.3, 1.4, 1.5, 2.5, 2.6, 2.7]  # a sixth position costs a whole step more
    steep = AdaptiveDraftLength(10, cost_curve=cliff)
    steep._acc[3] = [90.0, 10.0]  # 3-gram matches: 90% accepted
    linear = AdaptiveDraftLength(10, cost_curve=cliff)
    linear._acc[3] = [90.0, 10.0]
    k = linear.choose(3, 4)
    pruned, cut = budget(paths, [3, 3, 3], steep, AlternativeRates())
    assert cut[0] == paths[0][:k] and k == 4
    assert cut[1] == [] and cut[2] in ([], [1, 2])  # [1, 2] is the first branch's prefix: nothing new
    assert pruned.tokens == (1, 2, 3, 4)
    flat = AdaptiveDraftLength(10, cost_curve=FLAT)
    flat._acc[3] = [90.0, 10.0]
    pruned, cut = budget(paths, [3, 3, 3], flat, AlternativeRates())
    assert cut == paths and len(pruned) == len(tree)  # where positions are free, every branch runs


def test_the_lookup_tree_drafts_nothing_where_the_linear_draft_would_not():
    paths = [[1, 2], [7, 8]]
    policy = AdaptiveDraftLength(10, cost_curve=[1.0, 3.0, 4.0])
    policy._acc[1] = [1.0, 99.0]
    pruned, cut = budget(paths, [1, 1], policy, AlternativeRates())
    assert len(pruned) == 0 and cut == [[], []]
