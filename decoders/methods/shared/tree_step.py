"""One tree-verification step, shared by every method that checks several guesses at once.

The caller builds a `decoders.backends.tree.TokenTree` whose first ``n_draft`` nodes are the candidates
(parents before children, so they form a tree of their own) and whose later nodes, if any, are
extra rows the caller only wants the target's argmax at (lookahead's Jacobi window). One target
forward runs the whole tree (`KVRunner.run_tree`); `decoders.methods.shared.verify.accept_tree` picks
the accepted root-to-node path among the candidates; the cache keeps that path only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from decoders.methods.shared.common import HostValues, r
from decoders.methods.shared.verify import accept_tree
from decoders.records.kinds import (
    KIND_AR,
    KIND_BONUS,
    KIND_FIXED,
    STATUS_ACCEPTED,
    STATUS_REJECTED,
    STATUS_UNVERIFIED,
    EmitKind,
    Status,
)
from decoders.records.run import DraftRow

if TYPE_CHECKING:
    from decoders.backends.runner import KVRunner
    from decoders.backends.tree import TokenTree
    from decoders.methods.shared.common import RunBuilder


@dataclass
class TreeOutcome:
    """What one tree forward decided."""

    path: list[int]  # accepted candidate nodes, root to node
    next_token: int  # the target's token after the path (a fix, or a bonus at a leaf)
    best: list[int]  # the target's argmax after the prefix (0) and after every node (1 + i)
    rows: list[DraftRow]  # one per candidate node, parents and statuses set
    kind: EmitKind  # how the last emitted token came to be (ar | fix | bonus)


def tree_statuses(parents: Sequence[int], path: Sequence[int]) -> list[Status]:
    """acc on the accepted path; rej where the target judged a node (its parent is the root or
    accepted) and refused it; unv below a refused node, never judged."""
    on_path = set(path)
    out: list[Status] = []
    for i, parent in enumerate(parents):
        if i in on_path:
            out.append(STATUS_ACCEPTED)
        elif parent < 0 or parent in on_path:
            out.append(STATUS_REJECTED)
        else:
            out.append(STATUS_UNVERIFIED)
    return out


def last_kind(parents: Sequence[int], path: Sequence[int]) -> EmitKind:
    """ar without candidates; bonus when the path ends at a leaf (nothing left to reject);
    fix when some child of the path's end (or of the root) was refused."""
    if not parents:
        return KIND_AR
    end = path[-1] if path else -1
    return KIND_FIXED if any(p == end for p in parents) else KIND_BONUS


def verify_tree(b: RunBuilder, T: KVRunner, tree: TokenTree, n_draft: int, record: bool = True) -> TreeOutcome:
    """Run ``tree`` after the builder's sequence in one forward, accept the longest candidate
    path (nodes ``0..n_draft-1``), keep its cache, and describe every candidate as a draft row."""
    import torch

    tokens, parents = tree.tokens[:n_draft], tree.parents[:n_draft]
    if any(p >= n_draft for p in parents):
        raise ValueError("candidate nodes must form a tree of their own, before any extra node")
    logits = T.run_tree(b.seq, tree)
    parts = [logits.argmax(-1)]
    if record and n_draft:
        after_parent = torch.tensor([p + 1 for p in parents], device=logits.device)
        ids = torch.tensor(tokens, device=logits.device).view(-1, 1)
        parts.append(torch.softmax(logits[after_parent], -1).gather(1, ids).view(-1))
    got = HostValues.transfer(parts)
    best = got.ints(len(tree) + 1)
    p_d = got.take(n_draft) if record and n_draft else None
    path, nxt = accept_tree(best[: n_draft + 1], tokens, parents)
    T.keep_path(path)
    disp = b.ctx.family.display
    statuses = tree_statuses(parents, path)
    rows = [DraftRow(t, disp(t), None, r(p_d[i]) if p_d else None, 1.0 if s == STATUS_ACCEPTED else 0.0, s, parents[i])
            for i, (t, s) in enumerate(zip(tokens, statuses, strict=False))]
    return TreeOutcome(path, nxt, best, rows, last_kind(parents, path))


def commit_tree(b: RunBuilder, tree: TokenTree, outcome: TreeOutcome, **fields):
    """Emit the accepted path and the target's next token as one iteration."""
    tokens = [tree.tokens[i] for i in outcome.path] + [outcome.next_token]
    return b.commit(tokens, outcome.kind, outcome.rows, **fields)


def with_extra(candidates: TokenTree, extra_tokens: Sequence[int], extra_parents: Sequence[int]):
    """The candidates' tree followed by extra nodes whose parents are numbered among the extras
    (-1: the root); returns the combined tree and the index of the first extra node."""
    from decoders.backends.tree import TokenTree

    n = len(candidates)
    parents = tuple(candidates.parents) + tuple(p + n if p >= 0 else -1 for p in extra_parents)
    return TokenTree(tuple(candidates.tokens) + tuple(extra_tokens), parents), n
