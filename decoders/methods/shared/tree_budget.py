"""Which nodes of a candidate tree are worth verifying: the most expected tokens per unit of cost.

A tree of candidates (prompt lookup's several matches, lookahead's pool n-grams) is a set of
guesses, each a node whose chance of being accepted is the product of the chances along its path:

- a node that is its parent's first child continues the best guess there: its chance is the
  acceptance rate of that kind of guess (for prompt lookup, of a match of that n-gram length,
  learned by `decoders.methods.shared.draft_policy.AdaptiveDraftLength`);
- a node that is its parent's k-th child (k >= 1) is an alternative, accepted only where every
  guess before it was not: its chance is learned here, per rank k, from how often an alternative
  of that rank was the one accepted when its parent was.

The expected tokens of a step are 1 + the sum of its nodes' chances (the target's own token
after the accepted path is always emitted), its cost T(1 + nodes) one-token forwards. `prune`
starts from a base (the first branch, cut to the length a linear draft would take) and adds the
other nodes in decreasing order of chance (a child never before its parent) up to the count with
the most expected tokens per cost: an alternative is verified only where its chance pays for its
position on top of what the linear draft already costs.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from decoders.backends.tree import TokenTree
    from decoders.methods.shared.draft_policy import AdaptiveDraftLength

#: Beta pseudo-counts (accepted, passed over) of an alternative before the run has judged any: about
#: 1 in 14, what prompt lookup's second and third matches scored on the bundled model (4 of 59 at
#: the root, 18 Spec-Bench prompts, 2026-12-01); worth 7 observations, so a run soon has its own.
ALT_PRIOR = (0.5, 6.5)


def child_ranks(parents: Sequence[int]) -> list[int]:
    """Each node's rank among its parent's children, in node order (0: the first child)."""
    seen: dict[int, int] = defaultdict(int)
    ranks = []
    for parent in parents:
        ranks.append(seen[parent])
        seen[parent] += 1
    return ranks


class AlternativeRates:
    """How often a parent's k-th child (k >= 1) was the one accepted, when the parent was."""

    def __init__(self):
        self._counts: dict[int, list[float]] = defaultdict(lambda: list(ALT_PRIOR))

    def rate(self, rank: int) -> float:
        acc, passed = self._counts[min(rank, 3)]
        return acc / (acc + passed)

    def observe(self, parents: Sequence[int], path: Sequence[int]) -> None:
        """Learn from one verified tree: at the root and at every node of the accepted path, each
        alternative child was accepted (on the path) or passed over."""
        on_path = set(path)
        reached = {-1} | on_path
        for node, (parent, rank) in enumerate(zip(parents, child_ranks(parents), strict=False)):
            if rank and parent in reached:
                self._counts[min(rank, 3)][0 if node in on_path else 1] += 1


def chances(parents: Sequence[int], first_rate: Sequence[float], alternatives: AlternativeRates) -> list[float]:
    """Each node's chance of being accepted: the product along its path of ``first_rate[node]``
    (for a first child) or the alternative rate of its rank."""
    out: list[float] = []
    for node, (parent, rank) in enumerate(zip(parents, child_ranks(parents), strict=False)):
        step = first_rate[node] if rank == 0 else alternatives.rate(rank)
        out.append((out[parent] if parent >= 0 else 1.0) * step)
    return out


def prune(parents: Sequence[int], chance: Sequence[float], cost: Callable[[int], float],
          base: Sequence[int] = ()) -> list[int]:
    """The nodes to verify, in their original order: the ``base`` nodes (a tree of their own,
    kept whatever they cost), then the others most likely first (a parent always before its
    children, which are never more likely), as many as give the most expected tokens per cost,
    ``(1 + sum of chances) / cost(1 + nodes)``."""
    kept = set(base)
    expected = 1.0 + sum(chance[i] for i in kept)
    best_n, best_rate = 0, expected / cost(1 + len(kept))
    order = sorted((i for i in range(len(parents)) if i not in kept), key=lambda i: (-chance[i], i))
    for n, node in enumerate(order, start=1):
        expected += chance[node]
        rate = expected / cost(1 + len(kept) + n)
        if rate > best_rate:
            best_n, best_rate = n, rate
    kept.update(order[:best_n])
    # a parent is at least as likely as its child, and on a tie sorts first: the set is a tree
    return [i for i in range(len(parents)) if i in kept]


def subtree(tree: TokenTree, kept: Sequence[int]) -> TokenTree:
    """The tree of the ``kept`` nodes (each one's parent kept too), renumbered in order."""
    from decoders.backends.tree import TokenTree

    new = {old: i for i, old in enumerate(kept)}
    parents = []
    for old in kept:
        parent = tree.parents[old]
        if parent >= 0 and parent not in new:
            raise ValueError(f"node {old} is kept but its parent {parent} is not")
        parents.append(new[parent] if parent >= 0 else -1)
    return TokenTree(tuple(tree.tokens[i] for i in kept), tuple(parents))


def path_nodes(paths: Sequence[Sequence[int]]) -> list[list[int]]:
    """For each path, its nodes in ``TokenTree.from_paths(paths)`` (numbered as it numbers them)."""
    out: list[list[int]] = []
    children: dict[tuple[int, int], int] = {}
    for path in paths:
        node, nodes = -1, []
        for token in path:
            node = children.setdefault((node, int(token)), len(children))
            nodes.append(node)
        out.append(nodes)
    return out


def budget(paths: list[list[int]], match_lens: list[int], policy: AdaptiveDraftLength,
           alternatives: AlternativeRates, extra: int = 0) -> tuple[TokenTree, list[list[int]]]:
    """The branches cut to the nodes that pay for their position (see the module docstring):
    the first branch to the length a linear draft would take (none, or now and then a short
    exploring draft, where that is none); then the other branches' nodes, a branch's own tokens at
    its match's acceptance rate, an alternative at the rate learned for its rank, where they pay.
    ``match_lens``: per branch, the key its acceptance is learned under (prompt lookup: the
    matched n-gram's length); ``extra``: positions the forward runs beside the tree (lookahead's
    window). Returns the tree of the kept nodes and each branch cut to its kept prefix (empty:
    dropped)."""
    from decoders.backends.tree import TokenTree

    tree = TokenTree.from_paths(paths)
    rates = [policy.acceptance(n) for n in match_lens]
    n_first = match_lens[0]
    nodes = path_nodes(paths)
    owner = [0] * len(tree)
    for i, branch in reversed(list(enumerate(nodes))):  # the first branch through a node owns it
        for node in branch:
            owner[node] = i
    first = policy.choose(n_first, len(paths[0]), extra)  # the linear draft's length (or an exploring one)
    if first:
        kept = prune(tree.parents, chances(tree.parents, [rates[o] for o in owner], alternatives),
                     lambda n: policy.cost(n + extra), base=nodes[0][:first])
    else:
        kept = []  # the linear draft would not draft here: nor does the tree
    keep = set(kept)
    cut = [path[:next((k for k, node in enumerate(branch) if node not in keep), len(branch))]
           for path, branch in zip(paths, nodes, strict=False)]
    return subtree(tree, kept), cut
