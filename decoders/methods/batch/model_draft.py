"""Speculative decoding's model draft at batch B (`ModelDraft`): a draft model of its own (a helper
sharing the target's vocabulary) run batched, greedy, for γ steps over every row at once, in its
own batched cache (`decoders.backends.capabilities.BatchedModel`: `BatchedLM` on torch,
`LlamaCppBatched` on llama.cpp) where each row sits at its own length.

One iteration, per row: the draft first reads the row's tokens it has not cached yet (the last
emitted token, and after a fully accepted chain also the draft's own last token: a ragged step),
then one token per step; after γ steps its cache holds the row's sequence and γ - 1 drafts. Once
the target has verified every row's chain in its one forward (`decoders.methods.batch.chain`),
`settle` keeps the drafts each row accepted and rolls the rest back (its ``rollback``), so
the next iteration starts from the row's accepted sequence. The drafts never change a row's
output (greedy verification keeps the target's tokens); they only set how many it emits per
forward (on llama.cpp a draft's chain may itself depend on how its tokens were batched: a
quantised file's kernels round a token's keys differently in a batch of one and of several).

The drafts that draft batched (`BATCHED_DRAFTS`): on torch a helper model, or the int4 self-draft
as the main model's int4 copy (`decoders.backends.batched_int4`), and a trained head from the
target's own hidden states (`decoders.methods.batch.head_draft`); on llama.cpp a GGUF helper
(`LLAMACPP_BATCHED_DRAFTS`). The early exit drafts through the engine's one-sequence backends only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decoders.backends.capabilities import BatchedModel

#: The kinds of draft (`decoders.models.drafts`) that draft at batch B on torch.
BATCHED_DRAFTS = ("helper", "int4", "head")
#: The kinds that draft at batch B on llama.cpp (a GGUF helper, in a `LlamaCppBatched` of its own).
LLAMACPP_BATCHED_DRAFTS = ("helper",)


def unbatched_draft(kind: str | None, backend: str = "torch") -> str | None:
    """Why speculative decoding at batch B cannot draft with ``kind`` on ``backend`` (None: it can)."""
    if backend == "llamacpp":
        if kind is None:
            return ("speculative decoding at batch > 1 on llama.cpp needs a GGUF helper model: give --helper FILE.gguf "
                    "(or --helper bundled), or drop spec from --methods")
        if kind not in LLAMACPP_BATCHED_DRAFTS:
            return (f"speculative decoding at batch > 1 on llama.cpp drafts with a GGUF helper model only, not the "
                    f"{kind} draft; give --helper FILE.gguf, or drop spec from --methods")
        return None
    if kind is None:
        return ("speculative decoding at batch > 1 needs a draft: load a helper model with --helper SRC or draft "
                "with --self-draft int4 or --self-draft head")
    if kind not in BATCHED_DRAFTS:
        return (f"speculative decoding at batch > 1 drafts with a helper model, the int4 self-draft or a trained head "
                f"only, not the {kind} draft; give --helper SRC, --self-draft int4 or --self-draft head, or drop spec "
                "from --methods")
    return None


class ModelDraft:
    """The rows' drafts from one batched draft model, γ tokens per row per iteration."""

    def __init__(self, lm: BatchedModel, gamma: int):
        if gamma < 1:
            raise ValueError(f"a model draft drafts 1+ tokens per iteration, got gamma {gamma}")
        self.lm = lm
        self.gamma = gamma
        self._cached_drafts = 0  # drafts of the last `propose` in the cache (steps - 1; 0: none)
        self.forwards = 0

    def start(self, prompts: Sequence[Sequence[int]]) -> None:
        """Prefill every row's prompt (the target's first token is read in the first `propose`)."""
        self.lm.start(prompts)
        self.forwards += 1
        self._cached_drafts = 0

    def propose(self, seqs: Sequence[list[int]], budgets: Sequence[int]) -> list[list[int]]:
        """Each row's greedy draft after ``seqs[b]`` (the rows in the cache's order), at most
        ``budgets[b]`` tokens (γ steps for every row while any may use them)."""
        if len(seqs) != self.lm.rows:
            raise ValueError(f"propose needs a sequence for each of the {self.lm.rows} rows, got {len(seqs)}")
        steps = min(self.gamma, max(budgets, default=0))
        self._cached_drafts = 0
        if steps <= 0:
            return [[] for _ in seqs]
        tails = [seq[pos:] for seq, pos in zip(seqs, self.lm.next_pos, strict=True)]
        logits = self.lm.step(tails)
        self.forwards += 1
        last = [logits[b, len(tail) - 1].argmax().item() for b, tail in enumerate(tails)]
        self.lm.commit([len(tail) for tail in tails])
        drafts = [[int(t)] for t in last]
        for _ in range(steps - 1):
            nxt = self.lm.step([[d[-1]] for d in drafts])[:, 0].argmax(-1).tolist()
            self.forwards += 1
            self.lm.commit([1] * len(drafts))
            for d, t in zip(drafts, nxt, strict=True):
                d.append(int(t))
        self._cached_drafts = steps - 1
        return [d[: max(0, budget)] for d, budget in zip(drafts, budgets, strict=True)]

    def settle(self, accepted: Sequence[int]) -> None:
        """Row b accepted its first ``accepted[b]`` drafts: the cache keeps those, forgets the rest."""
        cached = self._cached_drafts
        self.lm.rollback([cached - min(n, cached) for n in accepted])
        self._cached_drafts = 0

    def keep_rows(self, rows: Sequence[int]) -> None:
        self.lm.keep_rows(rows)

    def tidy(self, compact_at: float) -> None:
        """Squeeze the cache's holes out when they pass ``compact_at`` of its slots."""
        if self.lm.rows and self.lm.holes > compact_at * self.lm.slots * self.lm.rows:
            self.lm.compact()
