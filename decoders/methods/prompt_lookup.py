"""Prompt lookup decoding: drafts copied from an earlier occurrence of the sequence's tail n-gram.

No helper model: the draft costs a dictionary lookup, and the target verifies it greedily in one
forward. It pays where the output copies its input (summaries, RAG, code edits). With the
adaptive policy (the default) each draft is cut to the length that its expected acceptance
pays for (`decoders.methods.draft_policy`); "fixed" drafts up to k tokens whenever a match exists.
"""

from __future__ import annotations

import torch

from decoders.methods.common import DecodeContext, MethodGen, RunBuilder, ms
from decoders.methods.draft_policy import AdaptiveDraftLength
from decoders.methods.ngram import NgramIndex
from decoders.records import KIND_AR, KIND_BONUS, KIND_FIXED, PLDMatch


def prompt_lookup(ctx: DecodeContext) -> MethodGen:
    params, T = ctx.params, ctx.main
    b = RunBuilder(ctx, "pld", f"Prompt lookup (n={params.ngram_min}..{params.ngram_max}, k≤{params.num_pred}, {params.draft_policy})")
    index = NgramIndex(params.ngram_min, params.ngram_max, b.seq)
    n_prompt = len(ctx.prompt_ids)
    disp = ctx.family.display
    policy = AdaptiveDraftLength(params.num_pred) if params.draft_policy == "adaptive" else None
    while not b.done:
        t0 = ctx.clock()
        found = index.lookup(min(params.num_pred, b.remaining - 1))
        drafts = found[0] if found else []
        if policy is not None and drafts:
            drafts = drafts[: policy.choose(found[2], len(drafts))]
        t_lookup = ctx.clock() - t0
        g = len(drafts)
        logits = T.run(b.seq + drafts, keep=g + 1)
        best = logits.argmax(-1)
        if params.record and g:
            p_d = torch.softmax(logits[:g], -1).gather(1, best.new_tensor(drafts).view(-1, 1)).view(-1)
            got = torch.cat([best.double(), p_d.double()]).tolist()
            preds, p_d = [int(x) for x in got[: g + 1]], got[g + 1:]
        else:
            preds, p_d = best.tolist(), None
        n = 0
        while n < g and drafts[n] == preds[n]:
            n += 1
        if policy is not None and T.log[-1].positions == g + 1:  # a decode forward, not the prefill
            policy.observe(found[2] if found else None, g, n, g + 1, T.log[-1].seconds)
        fields = {"t_draft_ms": ms(t_lookup), "t_verify_ms": ms(T.log[-1].seconds)}
        if found:
            start, size = found[1], found[2]
            fields["pld"] = PLDMatch(start=start, n=size, in_prompt=start < n_prompt,
                                     ngram=[disp(t) for t in b.seq[start - size:start]])
        kind = KIND_AR if g == 0 else (KIND_BONUS if n == g else KIND_FIXED)
        it = b.commit(drafts[:n] + [preds[n]], kind, b.draft_rows(drafts, n, p=p_d), **fields)
        index.extend(b.seq[len(index.seq):])
        yield from b.yielding(it)
    return b.finish_run({"main": T})
