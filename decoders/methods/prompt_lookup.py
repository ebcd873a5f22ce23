"""Prompt lookup decoding: drafts copied from an earlier occurrence of the sequence's tail n-gram.

No helper model: the draft costs a dictionary lookup, and the target verifies it greedily in one
forward. It pays where the output copies its input (summaries, RAG, code edits). With the
adaptive policy (the default) each draft is cut to the length that its expected acceptance
pays for (`decoders.methods.shared.draft_policy`); "fixed" drafts up to k tokens whenever a match exists.
"""

from __future__ import annotations

from typing import Annotated

from decoders.core.declarations import BenchTarget, Counterpart, Figure, LoopCounterpart, Method, ParamSpec, register
from decoders.core.errors import DecodeError
from decoders.methods.shared.common import DecodeContext, HostValues, MethodGen, RunBuilder, ms
from decoders.methods.shared.draft_policy import DRAFT_POLICY, AdaptiveDraftLength
from decoders.methods.shared.ngram import NgramIndex
from decoders.methods.shared.verify import accept_prefix
from decoders.records.bounds import Count, PerStep, TokenText
from decoders.records.run import Detail, register_detail

NUM_PRED = ParamSpec("num_pred", "k copy length", "prompt lookup: at most K tokens copied per match", 10,
                     low=1, high=64, metavar="K", symbol="k")
NGRAM_MAX = ParamSpec("ngram_max", "n-gram max", "prompt lookup: longest n-gram looked up", 3, low=1, high=16)
NGRAM_MIN = ParamSpec("ngram_min", "n-gram min", "prompt lookup: shortest n-gram looked up", 1, low=1, high=16)
BRANCHES = ParamSpec("branches", "B branches",
                     "prompt lookup: distinct continuations of the tail n-gram verified together as a tree "
                     "(1: one draft, a chain)", 1, low=1, high=16, metavar="B")


@register_detail
class LookupMatch(Detail, tag="lookup"):
    """Where prompt lookup found its draft: the n-gram and the position its continuation starts."""

    start: Count  # index in the full sequence (prompt + output) where the copied tokens start
    n: Count  # length of the matched n-gram
    in_prompt: bool
    ngram: Annotated[list[TokenText], PerStep]


def prompt_lookup(ctx: DecodeContext) -> MethodGen:
    import torch

    params, T = ctx.params, ctx.main
    if params.branches > 1:  # several matches verified as a tree: decoders.methods.shared.lookup_tree
        from decoders.methods.shared.lookup_tree import prompt_lookup_tree

        return (yield from prompt_lookup_tree(ctx))
    b = RunBuilder(ctx, "pld")
    index = NgramIndex(params.ngram_min, params.ngram_max, b.seq)
    n_prompt = len(ctx.prompt_ids)
    disp = ctx.family.display
    policy = AdaptiveDraftLength(params.num_pred, ctx.cost_curve) if params.draft_policy == "adaptive" else None
    while not b.done:
        t0 = ctx.clock()
        found = index.lookup(min(params.num_pred, b.remaining - 1))
        drafts = found[0] if found else []
        if policy is not None and found is not None and drafts:  # drafts come from a match
            drafts = drafts[: policy.choose(found[2], len(drafts))]
        t_lookup = ctx.clock() - t0
        g = len(drafts)
        logits = T.run(b.seq + drafts, keep=g + 1)
        best = logits.argmax(-1)
        draft_t = best.new_tensor(drafts)
        verdict = accept_prefix(best, draft_t)
        parts = [verdict.n_accepted.view(1), verdict.next_token.view(1)]
        if params.record and g:
            parts.append(torch.softmax(logits[:g], -1).gather(1, draft_t.view(-1, 1)).view(-1))
        got = HostValues.transfer(parts)
        n, nxt = got.ints(1)[0], got.ints(1)[0]
        p_d = got.take(g) if params.record and g else None
        if policy is not None and T.log[-1].positions == g + 1:  # a decode forward, not the prefill
            policy.observe(found[2] if found else None, g, n, g + 1, T.log[-1].seconds)
        fields: dict[str, object] = {"t_draft_ms": ms(t_lookup), "t_verify_ms": ms(T.log[-1].seconds)}
        if found:
            start, size = found[1], found[2]
            fields["detail"] = LookupMatch(start=start, n=size, in_prompt=start < n_prompt,
                                           ngram=[disp(t) for t in b.seq[start - size:start]])
        it = b.commit_verified(drafts, n, nxt, b.draft_rows(drafts, n, p=p_d), **fields)
        index.extend(b.seq[len(index.seq):])
        yield from b.yielding(it)
    return b.finish_run({"main": T})


def check(params, ui: bool = False) -> None:
    if params.ngram_min > params.ngram_max:
        fix = "lower n-gram min or raise n-gram max" if ui else "set --ngram-min <= --ngram-max"
        raise DecodeError(f"ngram_min ({params.ngram_min}) is larger than ngram_max ({params.ngram_max}); {fix}")


def _extras(run, stats, params, summary) -> dict:
    return {"draft_hits": stats.drafts}


METHOD = register(Method(
    order=20,
    name="pld",
    label="Prompt lookup",
    run=prompt_lookup,
    params=(BRANCHES, NUM_PRED, NGRAM_MAX, NGRAM_MIN, DRAFT_POLICY),
    greedy_only=True,
    detail="lookup",  # "lookup_tree" with --branches > 1
    figures=(Figure("draft_hits", "draft hits", "iterations where an n-gram matched and a draft was verified",
                    "{}"),),
    draft_length="num_pred",
    sweep_fixed=lambda name: {"draft_policy": "fixed"} if name == "num_pred" else {},  # k itself, not a cap
    bench_targets=(BenchTarget("counterpart"), BenchTarget(
        "variants_beat_plain",
        "prompt lookup with branches at least linear prompt lookup's speedup on every task group")),
    bench_variants=((("branches", 3),),),  # three branches verified as a tree
    # transformers' prompt lookup copies one match: the same k and longest n-gram; exact for one branch
    counterpart=Counterpart(lambda p, assistant: f"transformers prompt lookup (k={p.num_pred}, n<={p.ngram_max})",
                            options=lambda p: {"prompt_lookup_num_tokens": p.num_pred,
                                               "max_matching_ngram_size": p.ngram_max}),
    # llama-cpp-python's prompt lookup (LlamaPromptLookupDecoding): the same k and longest n-gram
    llamacpp_counterpart=LoopCounterpart(
        lambda p: f"llama-cpp-python LlamaPromptLookupDecoding (k={p.num_pred}, n<={p.ngram_max})",
        prompt_lookup=lambda p: {"num_pred_tokens": p.num_pred, "max_ngram_size": p.ngram_max}),
    linear=lambda p: p.branches == 1,
    describe=lambda p: (f"Prompt lookup (n={p.ngram_min}..{p.ngram_max}, k≤{p.num_pred}, {p.draft_policy}"
                        + (f", {p.branches} branches)" if p.branches > 1 else ")")),
    check=check,
    extras=_extras,
    aliases={"k": "num_pred", "B": "branches"},
    summary="drafts copied from an earlier occurrence of the text's last n-gram; no helper model",
))
