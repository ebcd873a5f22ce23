"""The suffix trees a run drafts from, its record of each draft, and the verify of a one-hot draft:
what suffix decoding (`decoders.methods.suffix`) and speculative decoding's hybrid draft
(`decoders.methods.speculative`, ``--hybrid suffix``) share.

Two trees: one over this request (its prompt and its output so far, extended by each emitted
token), and the memory's, over the session's earlier responses (`decoders.methods.shared.suffix_memory`).
The sequence's tail is matched in each (every suffix up to depth - 1 tokens that occurred), kept up
incrementally as tokens are emitted: O(depth) per token, never a rebuild.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Callable, Sequence

from decoders.methods.shared.suffix_draft import D, Draft, TreeDraft, best_draft
from decoders.methods.shared.suffix_tree import SuffixTree
from decoders.records.bounds import Count, PerStep, Prob, TokenText
from decoders.records.run import Detail, register_detail

if TYPE_CHECKING:
    from decoders.methods.shared.common import DecodeContext, RunBuilder

SOURCES = ("request", "memory")


@register_detail
class SuffixMatch(Detail, tag="suffix"):
    """Where suffix decoding found its draft: the tree, the matched tail, the candidates' evidence."""

    source: TokenText  # "request" (this prompt and output) or "memory" (an earlier response)
    n: Count  # length of the matched suffix
    suffix: Annotated[list[TokenText], PerStep]  # the matched tokens
    counts: Annotated[list[Count], PerStep]  # each drafted token's count in the tree (before the cut)
    probs: Annotated[list[Prob], PerStep]  # each drafted token's branch frequency
    score: float  # expected accepted tokens of the whole candidate path
    found: Count  # tokens the tree offered before the cost cut
    memory: Count = 0  # responses in the memory when this run started


class SuffixTrees:
    """This request's suffix tree and the memory's, with the sequence's tail matched in each.

    Made before the run's clock starts: choosing the memory's depth (a rebuild when another depth
    was asked for) and forgetting this prompt's earlier responses are the session's work, not a
    draft's. A prompt never drafts from its own earlier responses (that would make the draft an
    oracle of the baseline). ``start`` then indexes the prompt."""

    def __init__(self, ctx: DecodeContext):
        from decoders.methods.shared.suffix_memory import memory_for, prompt_key

        params = ctx.params
        self.depth, self.factor, self.min_prob = params.suffix_depth, params.suffix_factor, params.suffix_min_prob
        self.memory = memory_for(ctx.family, self.depth) if params.suffix_source == "both" else None
        if self.memory is not None:
            self.memory.forget(prompt_key(ctx.prompt_ids))
        self.held = len(self.memory) if self.memory is not None else 0  # responses it may draft from
        self.local = SuffixTree(self.depth)
        self.local_active: list[int] = []
        self.global_active: list[int] = []
        self.display = ctx.family.display

    def start(self, seq: Sequence[int]) -> None:
        self.local_active = self.local.extend(self.local.start(), seq)
        self.global_active = self.memory.tree.matches(seq) if self.memory is not None else []

    def draft(self, search: Callable[..., D | None], budget: int) -> D | None:
        """The better of the two trees' drafts (``search``: `best_path` or `best_tree`)."""
        return best_draft(search, self.local, self.local_active, self.memory.tree if self.memory is not None else None,
                          self.global_active, budget, self.factor, self.min_prob, self.depth)

    def advance(self, tokens: Sequence[int]) -> None:
        """Index the emitted ``tokens`` and follow them in the memory's tree."""
        for t in tokens:
            self.local_active = self.local.append(self.local_active, t)
            if self.memory is not None:
                self.global_active = self.memory.tree.follow(self.global_active, t)

    def advance_by(self, b: RunBuilder, emitted: int) -> None:
        """Index the last ``emitted`` tokens of the run."""
        self.advance(b.seq[len(b.seq) - emitted:])

    def detail(self, found: Draft | TreeDraft, seq: Sequence[int], g: int | None = None) -> SuffixMatch:
        """The record of ``found`` (drafted after ``seq``; ``g``: how many of its tokens were verified)."""
        from decoders.methods.shared.common import r

        counts = list(found.counts or [])
        probs = list(found.probs)
        if g:  # a tree cut to its first g nodes shows those
            counts, probs = counts[:g], probs[:g]
        return SuffixMatch(source=found.source, n=found.match_len,
                           suffix=[self.display(t) for t in seq[len(seq) - found.match_len:]],
                           counts=counts, probs=[r(x) for x in probs], score=round(found.score, 4),
                           found=len(found.tokens), memory=self.held)


def one_hot_step(b: RunBuilder, T, drafts: list[int], gen, verify_sampling: Callable) -> tuple[int, int, list | None]:
    """Verify ``drafts`` (no draft probabilities: a one-hot q) in one target forward after ``b.seq``:
    greedy, the longest prefix equal to the target's argmax; sampling, each accepted with the
    target's probability of it and a rejection resampled from the rest (``verify_sampling``, the
    caller's, so a test may break it). One host transfer. Returns (accepted, the next token, the
    target's probability of each draft when recording)."""
    import torch

    from decoders.backends.sampling import probs, sample
    from decoders.methods.shared.common import HostValues
    from decoders.methods.shared.verify import accept_prefix

    params = b.ctx.params
    greedy, g = params.greedy, len(drafts)
    logits = T.run(b.seq + drafts, keep=g + 1)
    draft_t = torch.tensor(drafts, dtype=torch.long, device=logits.device)
    p = None if greedy else probs(logits, params.temperature, greedy=False)
    if greedy:
        verdict = accept_prefix(logits.argmax(-1), draft_t)
        parts = [verdict.n_accepted.view(1), verdict.next_token.view(1)]
    elif g:
        assert p is not None and gen is not None  # sampling: probabilities and a generator
        q = torch.zeros(g, p.shape[-1], dtype=p.dtype, device=p.device).scatter_(1, draft_t.view(-1, 1), 1.0)
        verdict = verify_sampling(p, q, draft_t, gen)  # one-hot q: accepted with probability p(x)
        parts = [verdict.n_accepted.view(1), verdict.next_token.view(1)]
    else:
        assert p is not None and gen is not None
        parts = [torch.zeros(1, dtype=torch.long), sample(p[0], gen).view(1)]
    if params.record and g:
        pd = p if p is not None else torch.softmax(logits[:g], -1)
        parts.append(pd[:g].gather(1, draft_t.view(-1, 1)).view(-1))
    got = HostValues.transfer(parts)
    n, nxt = got.ints(1)[0], got.ints(1)[0]
    return n, nxt, (got.take(g) if params.record and g else None)


def hybrid_figures(run) -> dict:
    """Speculative decoding with the hybrid draft: how many iterations the suffix trees drafted
    (the rest the helper did, or none), and their share of the accepted drafted tokens."""
    mine = [it for it in run.iters if isinstance(it.detail, SuffixMatch) and it.draft]
    accepted = sum(it.n_accepted for it in run.iters)
    return {"suffix_drafted": len(mine),
            "from_suffix": round(sum(it.n_accepted for it in mine) / accepted, 3) if accepted else None}
