"""Speculative decoding with a draft tree (greedy): beside its linear draft, the helper's next
``width - 1`` candidates at each of the first ``depth`` positions are verified in the same target
forward (SpecInfer / Sequoia's static trees, the cheapest shape: siblings cost no helper forward).

The chain is the draft linear speculative decoding would verify, so a tree step never accepts
less than the linear one; when the target refuses a chain token but agrees with one of the
helper's alternatives there, the step gains that token and the target's next one after it.
Sampling stays linear (exact speculative sampling over a tree needs a different residual).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec.structs import replace

from decoders.core.declarations import ParamSpec, Shape
from decoders.methods.shared.common import HostValues, draft_chain, ms, r
from decoders.methods.shared.tree_step import commit_tree, verify_tree

if TYPE_CHECKING:
    from decoders.backends.runner import KVRunner
    from decoders.backends.tree import TokenTree
    from decoders.methods.shared.common import RunBuilder

TREE_WIDTH = ParamSpec("tree_width", "tree width", "speculative, greedy: candidates verified at each of the first "
                       "tree-depth draft positions, the helper's top-k (1: a linear draft)", 1, low=1, high=8)
TREE_DEPTH = ParamSpec("tree_depth", "tree depth", "speculative, greedy: how many of the first draft positions get "
                       "the helper's alternatives", 2, low=1, high=32, ui_range=(1, 16))
#: The bench's variant item for both: ``tree 2x3``.
TREE = Shape("tree", TREE_WIDTH.name, TREE_DEPTH.name, letters="WxD", meaning="width x depth")


def tree_shape(chain: list[int], alternatives: list[list[int]]) -> TokenTree:
    """The chain (nodes ``0..g-1``, each under the one before) and, at each depth ``i``, the
    alternatives in ``alternatives[i]`` as leaves under chain node ``i - 1`` (the root for 0).
    An alternative equal to the chain's token at its depth is dropped (it would be a duplicate)."""
    from decoders.backends.tree import TokenTree

    tokens = list(chain)
    parents = list(range(-1, len(chain) - 1))
    for depth, alts in enumerate(alternatives):
        for token in alts:
            if depth < len(chain) and token != chain[depth]:
                tokens.append(token)
                parents.append(depth - 1)
    return TokenTree(tuple(tokens), tuple(parents))


def tree_step(b: RunBuilder, T: KVRunner, D: KVRunner, budget: int, width: int, depth: int, record: bool):
    """One greedy iteration: draft ``budget`` tokens, verify them and the alternatives as a tree."""
    import torch

    mark = D.mark()
    drafts, q_rows = draft_chain(D, b.seq, budget, lambda row: (row.argmax().view(1), torch.softmax(row, -1)))
    t_draft = D.seconds_since(mark)
    chain_t, q = torch.cat(drafts), torch.stack(q_rows)
    depth = min(depth, budget)
    top = q[:depth].topk(width, dim=-1)
    # The tree is built on the host: one transfer of the chain, the alternatives and their q.
    got = HostValues.transfer([chain_t, top.indices.flatten(), top.values.flatten(),
                               q[torch.arange(budget), chain_t]])
    chain = got.ints(budget)
    alt_ids, alt_q = got.ints(depth * width), got.take(depth * width)
    q_by_node = list(got.take(budget))
    D.name_tail(chain[: budget - 1])  # the helper cached every draft but the last
    alternatives = [alt_ids[i * width:(i + 1) * width] for i in range(depth)]
    tree = tree_shape(chain, alternatives)
    q_by_node += [alt_q[j] for j in range(depth * width) if alt_ids[j] != chain[j // width]]
    outcome = verify_tree(b, T, tree, len(tree), record=record)
    outcome.rows = [replace(row, q=r(q_by_node[i])) for i, row in enumerate(outcome.rows)]
    return commit_tree(b, tree, outcome, t_draft_ms=ms(t_draft), t_verify_ms=ms(T.log[-1].seconds))
