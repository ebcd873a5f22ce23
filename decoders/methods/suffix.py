"""Suffix decoding (SuffixDecoding, Oliaro et al. 2025; vLLM's ``suffix`` method from Snowflake's
Arctic Inference): drafts from suffix trees, no helper model.

Two trees: one over this request (its prompt and its output so far, extended by each emitted
token), and the memory, one over the session's earlier responses (`decoders.methods.shared.suffix_memory`).
The sequence's tail is matched in each (every suffix up to depth - 1 tokens that occurred, kept up
incrementally: O(depth) per token), and from each matched node the most frequent continuation is
followed while the product of branch frequencies (a child's count over its node's continuations)
stays above a minimum probability, for at most factor x the match length tokens. The draft with
the best score (its expected accepted length) is verified in one forward.

With the adaptive policy the draft is then cut to the length whose expected accepted tokens pay
for the verify forward's width, T(k) measured at this context (none when nothing pays). Greedy
output equals autoregressive decoding; sampling is exact: the draft is one-hot, each token accepted
with the target's probability of it, a rejection resampled from the rest (`verify_sampling`).
"""

from __future__ import annotations

from typing import Generator

from decoders.core.declarations import Figure, Method, ParamSpec, register
from decoders.methods.shared.common import DecodeContext, MethodGen, RunBuilder, ms, r
from decoders.methods.shared.draft_policy import DRAFT_POLICY
from decoders.methods.shared.suffix_draft import best_path, best_tree
from decoders.methods.shared.suffix_policy import SuffixPolicy
from decoders.methods.shared.suffix_trees import SOURCES, SuffixMatch, SuffixTrees, one_hot_step
from decoders.methods.shared.verify import verify_sampling
from decoders.records.run import Iteration

__all__ = ["SuffixMatch", "suffix_decode"]  # SuffixMatch, the record, is read from here too

SUFFIX_DEPTH = ParamSpec("suffix_depth", "depth", "suffix: longest substring the suffix trees index "
                         "(a match plus its draft fit in it)", 24, low=2, high=64, symbol="depth")
SUFFIX_FACTOR = ParamSpec("suffix_factor", "factor", "suffix: draft at most factor x the matched suffix's "
                          "length", 1.0, kind="float", low=0.1, high=8.0, step=0.5, metavar="F", symbol="factor")
SUFFIX_MIN_PROB = ParamSpec("suffix_min_prob", "min prob", "suffix: stop the draft where the product of "
                            "branch frequencies falls below this", 0.1, kind="float", low=0.0, high=1.0, step=0.05,
                            metavar="P", symbol="p_min")
SUFFIX_MAX = ParamSpec("suffix_max", "k max", "suffix: at most K tokens drafted per iteration", 16,
                       low=1, high=64, metavar="K", symbol="k")
SUFFIX_SOURCE = ParamSpec("suffix_source", "draft from",
                          "suffix: draft from this request and the memory of earlier responses (both), or from "
                          "this request only (request)", "both", kind="choice", choices=("both", "request"))

SUFFIX_MODE = ParamSpec("suffix_mode", "draft shape",
                        "suffix: draft the most frequent path (path), or the likeliest continuations as a tree "
                        "verified in one forward (tree)", "path", kind="choice", choices=("path", "tree"))

def suffix_decode(ctx: DecodeContext) -> MethodGen:
    params, T = ctx.params, ctx.main
    # the memory's upkeep runs before the run's clock starts (`SuffixTrees`), and after the run and
    # its baseline are done (`decoders.engine`: every finished response joins, whatever its method):
    # adding this response and writing the file are the session's work, not a draft's (a large
    # memory's file takes longer to write than a run of 64 tokens)
    trees = SuffixTrees(ctx)
    b = RunBuilder(ctx, "suffix")
    trees.start(b.seq)
    policy = SuffixPolicy(ctx.cost_curve, learn_costs=params.greedy) if params.draft_policy == "adaptive" else None
    gen = None
    if not params.greedy:
        from decoders.backends.sampling import make_generator

        gen = make_generator(params.seed, ctx.family.device)
    if params.suffix_mode == "tree":
        yield from _tree_loop(ctx, b, trees, policy, gen)
        return b.finish_run({"main": T})
    while not b.done:
        t0 = ctx.clock()
        found = trees.draft(best_path, min(params.suffix_max, b.remaining - 1))
        drafts = list(found.tokens) if found else []
        if policy is not None and found is not None:
            drafts = drafts[: policy.choose(found.probs)]
        t_draft = ctx.clock() - t0
        g = len(drafts)
        fields: dict[str, object] = {}
        if found is not None:  # the record reads the tail the draft matched: before the commit
            fields["detail"] = trees.detail(found, b.seq)
        n, nxt, p_d = one_hot_step(b, T, drafts, gen, verify_sampling)
        if policy is not None and found is not None and g and T.log[-1].positions == g + 1:
            policy.observe(found.probs[:g], n, g + 1, T.log[-1].seconds)
        elif policy is not None and not g and T.log[-1].positions == 1:
            policy.observe([], 0, 1, T.log[-1].seconds)
        fields.update({"t_draft_ms": ms(t_draft), "t_verify_ms": ms(T.log[-1].seconds)})
        if policy is not None and found is not None and g < len(found.tokens):
            fields["draft_stop"] = ("no draft: at this run's acceptance and verify cost a plain step is cheaper"
                                    if not g else "cut: a longer draft would not pay for its verify cost")
        it = b.commit_verified(drafts, n, nxt, b.draft_rows(drafts, n, p=p_d), **fields)
        t1 = ctx.clock()
        trees.advance_by(b, len(it.emit))
        it.t_draft_ms = round(it.t_draft_ms + ms(ctx.clock() - t1), 3)  # the trees' update is the draft's cost
        yield from b.yielding(it)
    return b.finish_run({"main": T})  # the response joins the memory after the pair's clocks stop (the engine)


def _tree_loop(ctx: DecodeContext, b: RunBuilder, trees: SuffixTrees, policy: SuffixPolicy | None,
               gen) -> Generator[Iteration, None, None]:
    """Tree mode: the likeliest continuations of the best match (`best_tree`) verified in one
    forward. Greedy: the longest path the target's argmax follows (`verify_tree`). Sampling: a
    token drawn from the target after the prefix and after each accepted node, followed down
    while it is one of the node's children (`_sample_tree`): every emitted token is the target's
    own draw, so the output is distributed as sampling without a draft."""
    from decoders.backends.tree import TokenTree
    from decoders.methods.shared.tree_step import commit_tree, verify_tree

    params, T = ctx.params, ctx.main
    while not b.done:
        t0 = ctx.clock()
        found = trees.draft(best_tree, min(params.suffix_max, b.remaining - 1))
        g = len(found.tokens) if found else 0
        if policy is not None and found is not None:
            g = policy.choose_tree(found.probs, found.parents)
        tree = TokenTree(tuple(found.tokens[:g]), tuple(found.parents[:g])) if found else TokenTree((), ())
        t_draft = ctx.clock() - t0
        fields: dict[str, object] = {}
        if found is not None:
            fields["detail"] = trees.detail(found, b.seq, g)
            if g < len(found.tokens):
                fields["draft_stop"] = ("no draft: at this run's acceptance and verify cost a plain step is cheaper"
                                        if not g else "cut: a larger tree would not pay for its verify cost")
        if params.greedy:
            outcome = verify_tree(b, T, tree, g, record=params.record)
        else:
            outcome = _sample_tree(b, T, tree, gen, params.temperature, params.record)
        if policy is not None and T.log[-1].positions == g + 1:
            if found is not None and g:
                policy.observe_tree(found.probs[:g], found.parents[:g], outcome.path, g + 1, T.log[-1].seconds)
            elif not g:
                policy.observe([], 0, 1, T.log[-1].seconds)
        fields.update({"t_draft_ms": ms(t_draft), "t_verify_ms": ms(T.log[-1].seconds)})
        it = commit_tree(b, tree, outcome, **fields)
        t1 = ctx.clock()
        trees.advance_by(b, len(it.emit))
        it.t_draft_ms = round(it.t_draft_ms + ms(ctx.clock() - t1), 3)
        yield from b.yielding(it)


def _sample_tree(b: RunBuilder, T, tree, gen, temperature: float, record: bool):
    """Sampling over a tree of one-hot drafts: draw the target's token after the prefix; while it
    is a child of the node reached, accept that child and draw after it; the first draw that is no
    child (or any draw after a leaf) is emitted as the fix (the bonus). Exact: each emitted token
    is drawn from the target's distribution given everything before it."""
    from decoders.backends.sampling import probs, sample
    from decoders.methods.shared.common import HostValues
    from decoders.methods.shared.tree_step import TreeOutcome, last_kind, tree_statuses
    from decoders.records.kinds import STATUS_ACCEPTED
    from decoders.records.run import DraftRow

    logits = T.run_tree(b.seq, tree)
    p = probs(logits, temperature, greedy=False)
    children: dict[tuple[int, int], int] = {(parent, t): i for i, (t, parent) in
                                            enumerate(zip(tree.tokens, tree.parents, strict=True))}
    path: list[int] = []
    node = -1
    while True:
        x = int(HostValues.transfer([sample(p[node + 1], gen).view(1)]).ints(1)[0])
        child = children.get((node, x))
        if child is None:
            break
        path.append(child)
        node = child
    T.keep_path(path)
    p_d = None
    if record and len(tree):
        import torch

        rows = torch.tensor([q + 1 for q in tree.parents], device=p.device)
        ids = torch.tensor(tree.tokens, device=p.device).view(-1, 1)
        p_d = HostValues.transfer([p[rows].gather(1, ids).view(-1)]).take(len(tree))
    disp = b.ctx.family.display
    statuses = tree_statuses(tree.parents, path)
    drafts = [DraftRow(t, disp(t), None, r(p_d[i]) if p_d else None, 1.0 if s == STATUS_ACCEPTED else 0.0, s,
                       tree.parents[i]) for i, (t, s) in enumerate(zip(tree.tokens, statuses, strict=True))]
    return TreeOutcome(path, x, [], drafts, last_kind(tree.parents, path))


def _extras(run, stats, params, summary) -> dict:
    """Match length, the share of accepted drafted tokens per source, the memory's size, and the
    drafting's cost (lookups and tree updates) over the verify forwards'."""
    found = [it for it in run.iters if isinstance(it.detail, SuffixMatch)]
    accepted = {s: sum(it.n_accepted for it in found if it.detail.source == s) for s in SOURCES}
    total = sum(accepted.values())
    draft_ms = sum(it.t_draft_ms for it in run.iters)
    verify_ms = sum(it.t_verify_ms for it in run.iters)
    return {"draft_hits": stats.drafts,
            "match_len": round(sum(it.detail.n for it in found) / len(found), 2) if found else None,
            "from_memory": round(accepted["memory"] / total, 3) if total else None,
            "memory_responses": max((it.detail.memory for it in found), default=0),
            "draft_share": round(draft_ms / verify_ms, 4) if verify_ms else None}


def _describe(p) -> str:
    source = "" if p.suffix_source == "both" else ", this request only"
    tree = ", tree" if p.suffix_mode == "tree" else ""
    return (f"Suffix (depth {p.suffix_depth}, factor {p.suffix_factor:g}, p≥{p.suffix_min_prob:g}, "
            f"k≤{p.suffix_max}, {p.draft_policy}{tree}{source})")


METHOD = register(Method(
    order=120,  # after the methods that predate it: their places in every list stay
    name="suffix",
    label="Suffix decoding",
    run=suffix_decode,
    params=(SUFFIX_MAX, SUFFIX_DEPTH, SUFFIX_FACTOR, SUFFIX_MIN_PROB, SUFFIX_SOURCE, SUFFIX_MODE, DRAFT_POLICY),
    detail="suffix",
    figures=(Figure("draft_hits", "draft hits", "iterations where a suffix matched and a draft was verified", "{}"),
             Figure("match_len", "match length", "mean length of the matched suffix, over iterations that drafted"),
             Figure("from_memory", "from memory", "share of accepted drafted tokens that came from earlier responses",
                    "{:.0%}"),
             Figure("memory_responses", "memory",
                    "responses in the memory when this run started (this prompt's own left out)", "{}"),
             Figure("draft_share", "draft cost", "drafting and tree updates over the verify forwards' time",
                    "{:.1%}")),
    draft_length="suffix_max",
    sweep_fixed=lambda name: {"draft_policy": "fixed"} if name == "suffix_max" else {},
    describe=_describe,
    extras=_extras,
    noun="suffix decoding",
    aliases={"k": "suffix_max", "depth": "suffix_depth", "factor": "suffix_factor"},
    summary="drafts from suffix trees over this request and earlier responses; no helper model",
))
