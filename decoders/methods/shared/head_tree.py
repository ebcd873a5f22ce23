"""EAGLE-2's dynamic draft tree (Li et al. 2024), for a trained head (greedy).

Depth by depth the head expands the ``width`` most likely nodes of the last depth (by the product
of its probabilities along the path, which EAGLE-2 found tracks acceptance), all in one head
forward per depth; each gives its ``width`` most likely children. Of every node drafted, those
worth verifying are kept by `decoders.methods.shared.tree_budget.prune`: most likely first (a
child is never likelier than its parent, so the set stays a tree), as many as give the most
expected tokens per unit of the measured verify cost T(1 + nodes). One target forward verifies the
tree (`decoders.methods.shared.tree_step.verify_tree`); the accepted path's cache is kept and the
head's tree rows dropped (it adopts the verified positions from the target next time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from decoders.methods.shared.common import HostValues, ms, r
from decoders.methods.shared.tree_budget import prune, subtree
from decoders.methods.shared.tree_step import commit_tree, verify_tree

if TYPE_CHECKING:
    from decoders.backends.runner import KVRunner
    from decoders.methods.shared.common import RunBuilder
    from decoders.methods.shared.draft_policy import VerifyCost


def draft_tree(b: RunBuilder, D: KVRunner, depth: int, width: int):
    """``(tokens, parents, chance, q)`` of every node the head drafts, parents before children."""
    import torch

    backend: Any = D.backend  # a `decoders.backends.heads.draft.HeadDraft` (it has tree_rows)
    root = D.run(b.seq)[0]  # the head's row for the last token: the first depth's logits
    prefix = backend.cached_length
    top = torch.softmax(root, -1).topk(width)
    got = HostValues.transfer([top.indices, top.values])
    tokens, chance = got.ints(width), got.take(width)
    q = list(chance)  # each node's own draft probability (chance: the product along its path)
    parents = [-1] * width
    slot_of: dict[int, int] = {}  # node -> its head cache slot, once expanded
    frontier = list(range(width))
    for level in range(1, depth):
        beam = sorted(frontier, key=lambda i: -chance[i])[:width]
        ancestors, parent_slots = [], []
        for node in beam:
            path, p = [], parents[node]
            while p >= 0:
                path.append(slot_of[p])
                p = parents[p]
            ancestors.append(path)
            parent_slots.append(slot_of[parents[node]] if parents[node] >= 0 else prefix - 1)
        started = D.timer.start()
        logits = backend.tree_rows(torch.tensor([tokens[i] for i in beam], device=backend.device), parent_slots,
                                   [prefix + level - 1] * len(beam), ancestors, prefix)
        first = backend.cached_length - len(beam)
        for k, node in enumerate(beam):
            slot_of[node] = first + k
        top = torch.softmax(logits, -1).topk(width)
        got = HostValues.transfer([top.indices.flatten(), top.values.flatten()])
        D.log.append(D.timer.stop(started, len(beam), len(beam)))
        ids, probs = got.ints(len(beam) * width), got.take(len(beam) * width)
        frontier = []
        for k, node in enumerate(beam):
            for j in range(width):
                frontier.append(len(tokens))
                tokens.append(ids[k * width + j])
                parents.append(node)
                chance.append(chance[node] * probs[k * width + j])
                q.append(probs[k * width + j])
    backend.crop(prefix)  # the tree rows go; the verified positions come from the target next time
    return tokens, parents, chance, q


def dynamic_tree_step(b: RunBuilder, T: KVRunner, D: KVRunner, depth: int, width: int, cost: VerifyCost,
                      record: bool):
    """One greedy iteration with EAGLE-2's dynamic tree of at most ``depth`` levels."""
    from decoders.backends.tree import TokenTree

    mark = D.mark()
    tokens, parents, chance, q = draft_tree(b, D, depth, width)
    t_draft = D.seconds_since(mark)
    kept = prune(parents, chance, cost.cost, base=[0])
    tree = subtree(TokenTree(tuple(tokens), tuple(parents)), kept)
    outcome = verify_tree(b, T, tree, len(tree), record=record)
    outcome.rows = [replace(row, q=r(q[i])) for row, i in zip(outcome.rows, kept, strict=True)]
    cost.observe(T.log[-1].positions, T.log[-1].seconds)
    return commit_tree(b, tree, outcome, t_draft_ms=ms(t_draft), t_verify_ms=ms(T.log[-1].seconds))
