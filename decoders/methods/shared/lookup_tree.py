"""Prompt lookup with several matches (``--branches B`` > 1): when the tail n-gram occurred more
than once, the distinct continuations are verified together as a tree in one forward.

The first branch is the draft linear prompt lookup would copy, so the tree holds the linear
draft and a step never accepts less than it would. With the adaptive policy the tree is cut to
the nodes that pay for their positions (`decoders.methods.shared.tree_budget`): the first branch to the
length linear prompt lookup would draft, the others only where the chance that an alternative is
the one accepted, learned from this run, pays for its positions. The match-length acceptance is
learned from the branch the accepted path followed (or the first, when none was accepted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import msgspec

from decoders.methods.shared.common import MethodGen, RunBuilder, ms
from decoders.methods.shared.draft_policy import AdaptiveDraftLength
from decoders.methods.shared.ngram import NgramIndex
from decoders.methods.shared.tree_budget import AlternativeRates, budget
from decoders.methods.shared.tree_step import commit_tree, verify_tree
from decoders.records.bounds import MAX_COUNT, Count, PerStep, TokenText
from decoders.records.run import Detail, register_detail

if TYPE_CHECKING:
    from decoders.methods.shared.common import DecodeContext


@register_detail
class LookupTree(Detail, tag="lookup_tree"):
    """Where each branch was copied from, and which one the accepted path followed."""

    starts: Annotated[list[Count], PerStep]  # per branch: where its copied tokens start in the full sequence
    n: Annotated[list[Count], PerStep]  # per branch: the length of the matched n-gram
    in_prompt: Annotated[list[bool], PerStep]
    ngram: Annotated[list[TokenText], PerStep]  # the longest matched n-gram (the first branch's)
    # the branch the accepted path follows; -1 when nothing was accepted
    branch: Annotated[int, msgspec.Meta(ge=-1, le=MAX_COUNT)]


def branch_of(paths: list[list[int]], accepted: list[int]) -> int:
    """The first branch whose tokens start with the accepted tokens (-1 when none were)."""
    if not accepted:
        return -1
    return next((i for i, p in enumerate(paths) if p[:len(accepted)] == accepted), -1)


def prompt_lookup_tree(ctx: DecodeContext) -> MethodGen:
    from decoders.backends.tree import TokenTree

    params, T = ctx.params, ctx.main
    b = RunBuilder(ctx, params.method)  # prompt lookup's, which calls this with branches > 1
    index = NgramIndex(params.ngram_min, params.ngram_max, b.seq)
    n_prompt = len(ctx.prompt_ids)
    disp = ctx.family.display
    policy = AdaptiveDraftLength(params.num_pred, ctx.cost_curve) if params.draft_policy == "adaptive" else None
    alternatives = AlternativeRates()
    while not b.done:
        t0 = ctx.clock()
        found = index.lookup_many(min(params.num_pred, b.remaining - 1), params.branches)
        paths = [d for d, _, _ in found]
        if policy is not None and found:
            tree, paths = budget(paths, [n for _, _, n in found], policy, alternatives)
            found = [(d, s, n) for d, (_, s, n) in zip(paths, found, strict=False) if d]
            paths = [d for d in paths if d]
        else:
            tree = TokenTree.from_paths(paths)
        t_lookup = ctx.clock() - t0
        outcome = verify_tree(b, T, tree, len(tree), record=params.record)
        accepted = [tree.tokens[i] for i in outcome.path]
        branch = branch_of(paths, accepted)
        if policy is not None and T.log[-1].positions == len(tree) + 1:  # a decode forward, not the prefill
            alternatives.observe(tree.parents, outcome.path)
            i = max(branch, 0)
            n_gram = found[i][2] if found else None
            drafted = len(paths[i]) if paths else 0
            policy.observe(n_gram, drafted, len(accepted), len(tree) + 1, T.log[-1].seconds)
        fields: dict[str, object] = {"t_draft_ms": ms(t_lookup), "t_verify_ms": ms(T.log[-1].seconds)}
        if found:
            size = found[0][2]
            fields["detail"] = LookupTree(starts=[s for _, s, _ in found], n=[n for _, _, n in found],
                                          in_prompt=[s < n_prompt for _, s, _ in found],
                                          ngram=[disp(t) for t in b.seq[found[0][1] - size:found[0][1]]],
                                          branch=branch)
        it = commit_tree(b, tree, outcome, **fields)
        index.extend(b.seq[len(index.seq):])
        yield from b.yielding(it)
    return b.finish_run({"main": T})
