"""Drafting from a suffix tree (`decoders.methods.shared.suffix_tree`): from the node of each suffix
of the sequence's tail that the tree matched, follow its most frequent continuations. A child's
probability is its count over the node's continuations (the counts of all its children), and a
candidate's score is the product of those along its path: one path (`best_path`) or a tree
expanded best first (`best_tree`). Pure Python, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TypeVar

if TYPE_CHECKING:
    from decoders.methods.shared.suffix_tree import SuffixTree


@dataclass
class Draft:
    """A drafted path: its tokens, each token's probability given the path before it, and the
    path's score (the expected number of accepted tokens: the sum of the running products)."""

    tokens: list[int]
    probs: list[float]  # each token's branch frequency (count of the child over continuations of the node)
    score: float
    match_len: int  # how many tokens of the sequence's tail the draft's context matched
    source: str = ""  # which tree drafted it ("request", "memory")
    counts: list[int] | None = None  # each drafted token's count (the candidates' evidence)


def best_path(tree: SuffixTree, active: list[int], max_tokens: int, factor: float, min_prob: float,
              depth: int) -> Draft | None:
    """The best-scoring path draft over every match length: from the node of each matched suffix
    (length m, in ``active``) follow the most frequent child while the running product of branch
    frequencies stays at least ``min_prob``, for at most min(max_tokens, factor * m, depth - m)
    tokens; the highest score wins (a longer match on a tie). In the request's own tree the tail's
    latest occurrence has no continuation yet, so it adds nothing to a node's continuations."""
    best: Draft | None = None
    count, cont, most, tok = tree.count, tree.cont, tree.best, tree.token
    for m, node in enumerate(active, start=1):
        limit = min(max_tokens, int(factor * m + 1e-9), depth - m)
        if limit <= 0 or not cont[node]:
            continue
        tokens: list[int] = []
        probs: list[float] = []
        counts: list[int] = []
        prob, score = 1.0, 0.0
        cur = node
        while len(tokens) < limit and cont[cur]:
            child = most[cur]
            p = count[child] / cont[cur]
            if prob * p < min_prob:
                break
            prob *= p
            score += prob
            tokens.append(tok[child])
            probs.append(p)
            counts.append(count[child])
            cur = child
        if tokens and (best is None or score >= best.score):
            best = Draft(tokens, probs, score, m, counts=counts)
    return best


@dataclass
class TreeDraft:
    """A drafted tree: nodes in best-first order (a parent before its children), each node's
    parent (-1: it follows the sequence directly), its branch frequency and the probability of its
    whole path (the product of the frequencies down to it); the score is the sum of the latter
    (the expected accepted tokens)."""

    tokens: list[int]
    parents: list[int]
    probs: list[float]  # each node's branch frequency given its parent
    path_probs: list[float]
    counts: list[int]
    score: float
    match_len: int
    source: str = ""


def best_tree(tree: SuffixTree, active: list[int], max_tokens: int, factor: float, min_prob: float,
              depth: int) -> TreeDraft | None:
    """The best-scoring tree draft over every match length: from the node of each matched suffix
    (length m) the continuations are expanded best first by their path probability (the product
    of branch frequencies), each kept while that is at least ``min_prob``, at most ``max_tokens``
    nodes, no deeper than min(factor * m, depth - m); the highest score wins (a longer match on a
    tie). Its most probable path is the path `best_path` drafts, when that fits."""
    import heapq

    best: TreeDraft | None = None
    count, cont, tok = tree.count, tree.cont, tree.token
    for m, node in enumerate(active, start=1):
        deepest = min(int(factor * m + 1e-9), depth - m)
        if deepest <= 0 or not cont[node] or max_tokens <= 0:
            continue
        out = TreeDraft([], [], [], [], [], 0.0, m)
        # (-path probability, order, tree node, its index in the draft, its depth); order breaks
        # ties first come, first served (a parent before its children, the lower token id first)
        heap: list[tuple[float, int, int, int, int]] = []
        order = _push(tree, heap, node, -1, 1, 1.0, min_prob, 0)
        while heap and len(out.tokens) < max_tokens:
            neg, _, c, parent_index, level = heapq.heappop(heap)
            index = len(out.tokens)
            out.tokens.append(tok[c])
            out.parents.append(parent_index)
            out.probs.append(count[c] / cont[tree.parent[c]])
            out.path_probs.append(-neg)
            out.counts.append(count[c])
            out.score += -neg
            if level < deepest and cont[c]:
                order = _push(tree, heap, c, index, level + 1, -neg, min_prob, order)
        if out.tokens and (best is None or out.score >= best.score):
            best = out
    return best


def _push(tree: SuffixTree, heap: list, parent: int, index: int, level: int, prob: float, min_prob: float,
          order: int) -> int:
    """Push the children of ``parent`` (draft index ``index``) whose path probability is at least
    ``min_prob`` onto ``heap``; the next order number."""
    import heapq

    count, cont, tok = tree.count, tree.cont, tree.token
    for c in sorted(tree.children(parent), key=lambda c: (-count[c], tok[c])):
        p = prob * count[c] / cont[parent]
        if p < min_prob:
            break  # sorted by count: the rest are less likely still
        heapq.heappush(heap, (-p, order, c, index, level))
        order += 1
    return order


D = TypeVar("D", Draft, TreeDraft)


def best_draft(search: Callable[..., D | None], local: SuffixTree, local_active: list[int],
               memory: SuffixTree | None, memory_active: list[int], budget: int, factor: float, min_prob: float,
               depth: int) -> D | None:
    """The higher-scoring draft of the request's own tree and the memory's tree (``search`` is
    `best_path` or `best_tree`; ``memory`` None: the request's alone), its ``source`` set
    ("request" or "memory"); None where neither matches or there is no budget. The one choice
    suffix decoding makes at batch 1 (`decoders.methods.suffix`) and at batch B
    (`decoders.methods.batch.chain.SuffixDraft`)."""
    if budget <= 0:
        return None
    found = search(local, local_active, budget, factor, min_prob, depth)
    if found is not None:
        found.source = "request"
    if memory is not None:
        other = search(memory, memory_active, budget, factor, min_prob, depth)
        if other is not None and (found is None or other.score > found.score):
            other.source = "memory"
            found = other
    return found
