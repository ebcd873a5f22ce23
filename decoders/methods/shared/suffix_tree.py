"""The suffix tree behind suffix decoding (SuffixDecoding, Oliaro et al.; Arctic Inference's design).

A depth-limited suffix trie: every substring of the indexed sequences up to ``depth`` tokens long
is a path from the root, and each node counts how often its substring occurred. Appending a token
to a sequence extends the (at most ``depth``) substrings that end at it: O(depth) per token, never
a rebuild. A whole sequence can be removed again (the memory evicts its oldest responses).

Drafting from it (the most frequent continuations of a matched suffix) is
`decoders.methods.shared.suffix_draft`. Pure Python, no torch: the app can build and replay it
without a model.

The nodes are rows of flat integer arrays (a node is its index; the root is 0), their children
found through one dict keyed by (parent, token), and each node keeps its most frequent child, so
that a draft never scans a node's children. Flat arrays cost about half the bytes of a Python
object and a dict per node (`BYTES_PER_NODE`), and they are what a memory file keeps: reading one
back copies the arrays and fills the one dict, where building from the responses visits every
substring again (`to_parts`, `from_parts`).
"""

from __future__ import annotations

from array import array
from typing import Sequence

ROOT = 0
NONE = -1  # no node (no child, no sibling); a free slot's token
STRIDE = 1 << 24  # the child dict's key: parent * STRIDE + token (token ids below 16.7 million)
MAX_TOKEN = STRIDE - 1
#: The arrays a tree is made of, in the order `to_parts` gives them.
FIELDS = ("token", "parent", "count", "cont", "best", "first", "next", "prev")
#: Measured bytes a node costs in memory: the eight 4-byte array entries and the child dict's entry
#: (its slot, its key and its value as Python integers). tracemalloc over the tree of the bundled
#: model's 1,016 answers (138,828 tokens, depth 24: 2,003,230 nodes, 14.4 a token): 140 bytes a
#: node, where the tree of Python objects and a dict per node before it took 269
#: (`scripts/measure_suffix_memory.py`). The memory's node bound is its size bound over this.
BYTES_PER_NODE = 140


class SuffixTree:
    """Counts of every substring (up to ``depth`` tokens) of the sequences added to it."""

    def __init__(self, depth: int):
        if depth < 2:
            raise ValueError("a suffix tree needs depth >= 2")
        self.depth = depth
        # one row per node; freed rows (a removed sequence's nodes) are reused
        self.token = array("i", [NONE])  # the token that leads to the node from its parent
        self.parent = array("i", [NONE])
        self.count = array("i", [0])  # occurrences of the substring
        self.cont = array("i", [0])  # occurrences followed by a token (the sum of the children's counts)
        self.best = array("i", [NONE])  # the most frequent child (on a tie the lower token id)
        self.first = array("i", [NONE])  # the children as a doubly linked list of siblings
        self.next = array("i", [NONE])
        self.prev = array("i", [NONE])
        self.kids: dict[int, int] = {}  # parent * STRIDE + token -> child
        self.free: list[int] = []
        self.nodes = 1  # nodes in the tree, the root included (the memory's size bound reads it)

    # building ---------------------------------------------------------------------------------
    def start(self) -> list[int]:
        """The active suffixes of a new, empty sequence: none (each append extends them)."""
        return []

    def _new(self, parent: int, token: int) -> int:
        if self.free:
            i = self.free.pop()
            self.token[i], self.parent[i], self.count[i], self.cont[i] = token, parent, 0, 0
            self.best[i] = self.first[i] = self.prev[i] = NONE
        else:
            i = len(self.token)
            self.token.append(token)
            self.parent.append(parent)
            self.count.append(0)
            self.cont.append(0)
            self.best.append(NONE)
            self.first.append(NONE)
            self.prev.append(NONE)
            self.next.append(NONE)
        head = self.first[parent]
        self.next[i] = head
        if head != NONE:
            self.prev[head] = i
        self.first[parent] = i
        self.kids[parent * STRIDE + token] = i
        self.nodes += 1
        return i

    def append(self, active: list[int], token: int) -> list[int]:
        """Append ``token`` to a sequence whose substrings ending at its last token are ``active``
        (lengths 1, 2, ... up to depth - 1, shortest first); returns the new active list. O(depth)."""
        out: list[int] = []
        kids, count, cont, best, tok = self.kids, self.count, self.cont, self.best, self.token
        keep = self.depth - 1
        for parent in [ROOT, *active]:
            child = kids.get(parent * STRIDE + token)
            if child is None:
                child = self._new(parent, token)
            c = count[child] = count[child] + 1
            cont[parent] += 1
            b = best[parent]
            if b == NONE or (b != child and (c > count[b] or (c == count[b] and token < tok[b]))):
                best[parent] = child
            if len(out) < keep:  # a substring of the full depth cannot be extended
                out.append(child)
        return out

    def extend(self, active: list[int], tokens: Sequence[int]) -> list[int]:
        for t in tokens:
            active = self.append(active, t)
        return active

    def add(self, tokens: Sequence[int]) -> None:
        """Index a whole sequence."""
        self.extend(self.start(), tokens)

    def remove(self, tokens: Sequence[int]) -> None:
        """Take back a sequence added with `add` (the counts it added, and the nodes only it made)."""
        depth, kids, count, cont, best = self.depth, self.kids, self.count, self.cont, self.best
        for i in range(len(tokens)):
            node = ROOT
            for t in tokens[i:i + depth]:
                child = kids.get(node * STRIDE + t)
                if child is None:  # never added (a forged file's responses): nothing to take back
                    break
                cont[node] -= 1
                count[child] -= 1
                if count[child] <= 0:  # nothing else passes through it: drop it and what hangs below
                    self._drop(child)
                    if best[node] == child:
                        best[node] = self._most_frequent(node)
                    break
                if best[node] == child:
                    best[node] = self._most_frequent(node)
                node = child

    def _most_frequent(self, node: int) -> int:
        """The child of ``node`` with the highest count (on a tie the lower token id), by a scan."""
        count, tok, nxt = self.count, self.token, self.next
        best, c = NONE, self.first[node]
        while c != NONE:
            if best == NONE or count[c] > count[best] or (count[c] == count[best] and tok[c] < tok[best]):
                best = c
            c = nxt[c]
        return best

    def _drop(self, node: int) -> None:
        """Unlink ``node`` from its siblings and free it and its subtree."""
        p, n = self.prev[node], self.next[node]
        if p != NONE:
            self.next[p] = n
        else:
            self.first[self.parent[node]] = n
        if n != NONE:
            self.prev[n] = p
        stack = [node]
        while stack:
            cur = stack.pop()
            c = self.first[cur]
            while c != NONE:
                stack.append(c)
                c = self.next[c]
            del self.kids[self.parent[cur] * STRIDE + self.token[cur]]
            self.token[cur] = NONE
            self.free.append(cur)
            self.nodes -= 1

    # matching and drafting ---------------------------------------------------------------------
    def child(self, node: int, token: int) -> int | None:
        return self.kids.get(node * STRIDE + token)

    def children(self, node: int) -> list[int]:
        """The children of ``node``, in no particular order."""
        out, c = [], self.first[node]
        while c != NONE:
            out.append(c)
            c = self.next[c]
        return out

    def walk(self, tokens: Sequence[int]) -> int | None:
        """The node of ``tokens`` (None when that substring never occurred)."""
        node = ROOT
        for t in tokens:
            child = self.kids.get(node * STRIDE + t)
            if child is None:
                return None
            node = child
        return node

    def follow(self, active: list[int], token: int) -> list[int]:
        """Where the sequence's tail sits in this tree after ``token``, without counting it (a tree
        the sequence only drafts from): the nodes of its suffixes that occurred, shortest first."""
        out: list[int] = []
        kids, keep = self.kids, self.depth - 1
        for parent in [ROOT, *active]:
            child = kids.get(parent * STRIDE + token)
            if child is None:  # a longer suffix cannot occur where a shorter one does not
                break
            if len(out) < keep:
                out.append(child)
        return out

    def matches(self, tail: Sequence[int]) -> list[int]:
        """The nodes of ``tail``'s suffixes that occurred, shortest first (what `follow` keeps up
        incrementally, computed once from scratch)."""
        active: list[int] = []
        for t in tail[-(self.depth - 1):]:
            active = self.follow(active, t)
        return active

    def substrings(self) -> dict[tuple[int, ...], tuple[int, int]]:
        """Every indexed substring with its (count, continuations): a test's view of the tree."""
        out: dict[tuple[int, ...], tuple[int, int]] = {}
        stack: list[tuple[tuple[int, ...], int]] = [((), ROOT)]
        while stack:
            path, node = stack.pop()
            if path:
                out[path] = (self.count[node], self.cont[node])
            for c in self.children(node):
                stack.append(((*path, self.token[c]), c))
        return out

    # keeping -----------------------------------------------------------------------------------
    def to_parts(self) -> tuple[list[bytes], list[int]]:
        """The arrays as bytes (`FIELDS`' order) and the free rows: what a memory file keeps."""
        return [getattr(self, f).tobytes() for f in FIELDS], list(self.free)

    @classmethod
    def from_parts(cls, depth: int, nodes: int, parts: Sequence[bytes], free: Sequence[int]) -> SuffixTree:
        """The tree `to_parts` gave, its child dict filled again. ValueError when the parts do not
        make a tree of ``nodes`` nodes (a damaged or forged file). The checks are whole-array ones
        (numpy, imported here: gguf and transformers bring it): lengths and ranges, the free rows,
        no two nodes under one parent with one token, and every children list linked both ways
        from its head, so that no walk over children can loop (`_check_links`); counts are not
        checked beyond their sign (a wrong count makes a worse draft, and every draft is verified)."""
        import numpy as np

        if len(parts) != len(FIELDS):
            raise ValueError(f"{len(parts)} arrays, not {len(FIELDS)}")
        if any(len(raw) % 4 for raw in parts) or len({len(raw) for raw in parts}) != 1 or not parts[0]:
            raise ValueError("the arrays are cut or their lengths differ")
        a = {f: np.frombuffer(raw, dtype="<i4") for f, raw in zip(FIELDS, parts, strict=True)}
        rows = len(a["token"])
        token, parent = a["token"], a["parent"]
        free_rows = np.asarray(list(free), dtype=np.int64)
        if len(free_rows) and (free_rows.min() < 1 or free_rows.max() >= rows):
            raise ValueError("the free rows do not add up")
        live = token != NONE
        live[ROOT] = True
        if ((np.bincount(free_rows, minlength=1) > 1).any() or rows - len(free_rows) != nodes
                or live[free_rows].any() or int(live.sum()) != nodes):
            raise ValueError("the free rows do not add up")
        if token[ROOT] != NONE or token.min() < NONE or token.max() > MAX_TOKEN:
            raise ValueError("a token is out of range")
        if a["count"].min() < 0 or a["cont"].min() < 0:
            raise ValueError("a count is negative")
        for f in ("parent", "best", "first", "next", "prev"):
            if a[f].min() < NONE or a[f].max() >= rows:
                raise ValueError("a link points outside the tree")
        _check_links(live, parent, a["first"], a["next"], a["prev"], a["best"])
        ids = np.flatnonzero(live)[1:]  # every live node but the root
        keys = parent[ids].astype(np.int64) * STRIDE + token[ids]
        kids = dict(zip(keys.tolist(), ids.tolist(), strict=True))
        if len(kids) != nodes - 1:
            raise ValueError("two nodes share a parent and a token")
        tree = cls(depth)
        for f in FIELDS:
            kept = array("i")
            kept.frombytes(a[f].astype("=i4").tobytes())
            setattr(tree, f, kept)
        tree.kids, tree.free, tree.nodes = kids, free_rows.tolist(), nodes
        return tree


def _check_links(live, parent, first, nxt, prev, best) -> None:
    """Every live node but the root hangs under a live parent, in its parent's children list: the
    list starts at the parent's ``first`` (which nothing precedes) and runs by ``next``, each link
    matched by ``prev`` the other way. ``next`` is then one-to-one and a head has no predecessor,
    so a walk from a head ends (no loop); and the most frequent child is a child. Whole-array
    checks (numpy arrays in, ValueError out)."""
    import numpy as np

    dead = ~live
    nodes = np.flatnonzero(live)
    kids = nodes[1:]
    if (parent[kids] < 0).any() or dead[parent[kids]].any():
        raise ValueError("a node hangs under no node")
    for links in (first, nxt, prev, best):  # a free row's own links are left over: never read
        held = links[nodes]
        if dead[held[held >= 0]].any():
            raise ValueError("a link leads to a free row")
    if parent[ROOT] != NONE or nxt[ROOT] != NONE or prev[ROOT] != NONE:
        raise ValueError("the root has a parent or siblings")
    has_next = kids[nxt[kids] != NONE]
    if (parent[nxt[has_next]] != parent[has_next]).any() or (prev[nxt[has_next]] != has_next).any():
        raise ValueError("a children list is broken")
    has_prev = kids[prev[kids] != NONE]
    if (nxt[prev[has_prev]] != has_prev).any():
        raise ValueError("a children list is broken")
    heads = kids[prev[kids] == NONE]  # each must be its parent's first, and a parent has one
    if (first[parent[heads]] != heads).any() or (np.bincount(parent[heads], minlength=1) > 1).any():
        raise ValueError("a children list has no head or two")
    with_kids = nodes[first[nodes] != NONE]
    if (parent[first[with_kids]] != with_kids).any() or (prev[first[with_kids]] != NONE).any():
        raise ValueError("a children list is broken")
    if len(with_kids) != len(heads):
        raise ValueError("a children list has no head or two")
    b = nodes[best[nodes] != NONE]
    if (parent[best[b]] != b).any() or len(b) != len(with_kids):
        raise ValueError("a most frequent child is not a child")
