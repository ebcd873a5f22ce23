"""The suffix tree behind suffix decoding (SuffixDecoding, Oliaro et al.; Arctic Inference's design).

A depth-limited suffix trie: every substring of the indexed sequences up to ``depth`` tokens long
is a path from the root, and each node counts how often its substring occurred. Appending a token
to a sequence extends the (at most ``depth``) substrings that end at it: O(depth) per token, never
a rebuild. A whole sequence can be removed again (the memory evicts its oldest responses).

Drafting from a node follows its most frequent continuations: a child's probability is its count
over the node's continuations (the counts of all its children), and a candidate's score is the
product of those along its path. Pure Python, no torch: the app can build and replay it without a
model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


class Node:
    """One substring: how often it occurred, how often something followed it, and what did."""

    __slots__ = ("count", "cont", "children")

    def __init__(self) -> None:
        self.count = 0  # occurrences of the substring
        self.cont = 0  # occurrences followed by a token (the sum of the children's counts)
        self.children: dict[int, Node] | None = None


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


class SuffixTree:
    """Counts of every substring (up to ``depth`` tokens) of the sequences added to it."""

    def __init__(self, depth: int):
        if depth < 2:
            raise ValueError("a suffix tree needs depth >= 2")
        self.depth = depth
        self.root = Node()
        self.nodes = 1  # nodes in the tree, the root included (the memory's size bound reads it)

    # building ---------------------------------------------------------------------------------
    def start(self) -> list[Node]:
        """The active suffixes of a new, empty sequence: none (each append extends them)."""
        return []

    def append(self, active: list[Node], token: int) -> list[Node]:
        """Append ``token`` to a sequence whose substrings ending at its last token are ``active``
        (lengths 1, 2, ... up to depth - 1, shortest first); returns the new active list. O(depth)."""
        out: list[Node] = []
        for parent in [self.root, *active]:
            kids = parent.children
            if kids is None:
                kids = parent.children = {}
            child = kids.get(token)
            if child is None:
                child = kids[token] = Node()
                self.nodes += 1
            child.count += 1
            parent.cont += 1
            if len(out) < self.depth - 1:  # a substring of the full depth cannot be extended
                out.append(child)
        return out

    def extend(self, active: list[Node], tokens: Sequence[int]) -> list[Node]:
        for t in tokens:
            active = self.append(active, t)
        return active

    def add(self, tokens: Sequence[int]) -> None:
        """Index a whole sequence."""
        self.extend(self.start(), tokens)

    def remove(self, tokens: Sequence[int]) -> None:
        """Take back a sequence added with `add` (the counts it added, and the nodes only it made)."""
        depth = self.depth
        for i in range(len(tokens)):
            node = self.root
            for t in tokens[i:i + depth]:
                kids = node.children
                assert kids is not None, "removing a sequence that was never added"
                child = kids[t]
                node.cont -= 1
                child.count -= 1
                if child.count == 0:  # nothing else passes through it: drop it and what hangs below
                    del kids[t]
                    self.nodes -= _size(child)
                    if not kids:
                        node.children = None
                    break
                node = child

    # matching and drafting ---------------------------------------------------------------------
    def walk(self, tokens: Sequence[int]) -> Node | None:
        """The node of ``tokens`` (None when that substring never occurred)."""
        node: Node | None = self.root
        for t in tokens:
            kids = node.children if node is not None else None
            if kids is None:
                return None
            node = kids.get(t)
        return node

    def follow(self, active: list[Node], token: int) -> list[Node]:
        """Where the sequence's tail sits in this tree after ``token``, without counting it (a tree
        the sequence only drafts from): the nodes of its suffixes that occurred, shortest first."""
        out: list[Node] = []
        for parent in [self.root, *active]:
            kids = parent.children
            child = kids.get(token) if kids is not None else None
            if child is None:  # a longer suffix cannot occur where a shorter one does not
                break
            if len(out) < self.depth - 1:
                out.append(child)
        return out

    def matches(self, tail: Sequence[int]) -> list[Node]:
        """The nodes of ``tail``'s suffixes that occurred, shortest first (what `follow` keeps up
        incrementally, computed once from scratch)."""
        active: list[Node] = []
        for t in tail[-(self.depth - 1):]:
            active = self.follow(active, t)
        return active


def best_path(active: list[Node], max_tokens: int, factor: float, min_prob: float, depth: int) -> Draft | None:
    """The best-scoring path draft over every match length: from the node of each matched suffix
    (length m, in ``active``) follow the most frequent child while the running product of branch
    frequencies stays at least ``min_prob``, for at most min(max_tokens, factor * m, depth - m)
    tokens; the highest score wins (a longer match on a tie). In the request's own tree the tail's
    latest occurrence has no continuation yet, so it adds nothing to a node's continuations."""
    best: Draft | None = None
    for m, node in enumerate(active, start=1):
        limit = min(max_tokens, int(factor * m + 1e-9), depth - m)
        if limit <= 0 or not node.cont:
            continue
        tokens: list[int] = []
        probs: list[float] = []
        counts: list[int] = []
        prob, score = 1.0, 0.0
        cur = node
        while len(tokens) < limit and cur.children:
            tok, child = max(cur.children.items(), key=_by_count)
            p = child.count / cur.cont
            if prob * p < min_prob:
                break
            prob *= p
            score += prob
            tokens.append(tok)
            probs.append(p)
            counts.append(child.count)
            cur = child
        if tokens and (best is None or score >= best.score):
            best = Draft(tokens, probs, score, m, counts=counts)
    return best


def _by_count(item: tuple[int, Node]) -> tuple[int, int]:
    return item[1].count, -item[0]  # the most frequent; on a tie the lower id (deterministic)


def _size(node: Node) -> int:
    """Nodes in the subtree under ``node``, itself included."""
    n, stack = 0, [node]
    while stack:
        cur = stack.pop()
        n += 1
        if cur.children:
            stack.extend(cur.children.values())
    return n
