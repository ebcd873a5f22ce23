"""Speculative decoding's trained-head draft at batch B (`HeadDraft`): an EAGLE-1/2, EAGLE-3 or
Medusa head drafting every row's chain from the target's own hidden states, which the target's
batched forward leaves beside its logits (`decoders.backends.batched.BatchedLM.want_features`: no
second forward, no host transfer beyond the iteration's one).

It drafts what the head drafts at batch 1 (`decoders.backends.heads.draft.HeadDraft`,
`decoders.backends.heads.medusa.MedusaDraft`) for each row:

* **EAGLE**: row j of the head's cache combines token j with the target's feature of position
  j - 1. The prefill's features fill each row's cache with its prompt (`start`). A chain's first
  step takes the row's last token and the target's feature of the position before it; each later
  step the head's own output. Once the target has verified every row's chain in its one forward,
  `settle` drops the rows the head made for its drafts beyond the last token and runs its layer
  again over the accepted ones, fed the target's features of the verify forward (as the batch-1
  head's catch-up does), so each row's cache holds its accepted sequence, every row from the
  target's features.
* **Medusa**: head i on the target's feature of the position before the row's last token guesses
  the row's draft i; that feature is the verify forward's at the row's last accepted position.

The head runs batched over the rows (`decoders.backends.heads.batched`); a row's drafts are its
batch-1 drafts up to the batched kernels' rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from decoders.backends.batched import BatchedLM
    from decoders.backends.heads.batched import BatchedEagle, BatchedMedusa


class HeadDraft:
    """Every row's greedy chain of γ tokens from a trained head over ``target``'s hidden states
    (``target``: the `BatchedLM` that `decode_batch` verifies with; see the module's note)."""

    def __init__(self, target: BatchedLM, head: BatchedEagle | BatchedMedusa, layers: Sequence[int] | None,
                 gamma: int):
        from decoders.backends.heads.batched import BatchedMedusa

        if gamma < 1:
            raise ValueError(f"a head draft drafts 1+ tokens per iteration, got gamma {gamma}")
        self.target = target
        self.medusa = head if isinstance(head, BatchedMedusa) else None
        self.eagle = None if isinstance(head, BatchedMedusa) else head
        self.gamma = gamma if self.medusa is None else min(gamma, self.medusa.max_draft)  # no head beyond its last
        target.want_features(layers)  # its forwards keep the states the head reads from now on
        self.forwards = 0
        self._first: torch.Tensor | None = None  # [B, width]: each row's feature before its last token
        self._last: list[int] = []  # each row's last token in the last `propose`
        self._drafts: list[list[int]] | None = None  # each row's whole chain (None: nothing drafted)
        self._base: list[int] = []  # each row's head length before the last `propose`

    def _features(self, rows: int) -> torch.Tensor:
        features = self.target.features
        if features is None or features.shape[0] != rows:
            raise ValueError(f"the head drafts from its target's last forward over {rows} rows; decode with the "
                             "BatchedLM it was made with")
        return features

    def start(self, prompts: Sequence[Sequence[int]]) -> None:
        """Read the prompts' features from the target's prefill (its `start` runs first)."""
        import torch

        features = self._features(len(prompts))  # [B, width of the longest, feature], left-padded
        width = features.shape[1]
        self._first = features[:, -1]
        self._drafts = None
        eagle = self.eagle
        if eagle is None:
            return
        eagle.reset(len(prompts))
        hidden = eagle.head.config.hidden
        feats = [torch.cat([torch.zeros(1, hidden, device=features.device),
                            eagle.feature(features[b, width - len(p):width - 1])]) for b, p in enumerate(prompts)]
        eagle.run(prompts, feats)
        self.forwards += 1

    def propose(self, seqs: Sequence[list[int]], budgets: Sequence[int]) -> list[list[int]]:
        """Each row's greedy draft after ``seqs[b]`` (the rows in the target's order), at most
        ``budgets[b]`` tokens (γ steps for every row while any may use them)."""
        first = self._first
        if first is None or len(seqs) != first.shape[0]:
            raise ValueError(f"propose needs a sequence for each of the draft's rows, got {len(seqs)}")
        steps = min(self.gamma, max(budgets, default=0))
        self._last = [seq[-1] for seq in seqs]
        self._drafts = None
        if steps <= 0:
            return [[] for _ in seqs]
        eagle = self.eagle
        if eagle is None:
            assert self.medusa is not None  # one of the two
            drafts = self.medusa.draft(first, steps)
        else:
            if eagle.lengths != [len(seq) - 1 for seq in seqs]:
                raise ValueError("the head's rows do not hold each sequence up to its last token; settle each "
                                 "iteration's accepted counts before the next propose")
            self._base = list(eagle.lengths)
            drafts = eagle.draft(self._last, eagle.feature(first), steps)
        self.forwards += steps
        self._drafts = drafts
        return [d[: max(0, budget)] for d, budget in zip(drafts, budgets, strict=True)]

    def settle(self, accepted: Sequence[int]) -> None:
        """Row b accepted its first ``accepted[b]`` drafts in the target's last forward (read while
        that forward's rows are all still in the batch): the head's rows follow the accepted
        sequence, fed the target's features of it."""
        import torch

        features = self._features(len(accepted))  # [B, k, feature]: the last token's position, then the drafts'
        old = self._first
        assert old is not None  # `start` ran
        index = torch.tensor([int(n) for n in accepted], dtype=torch.long, device=features.device)
        self._first = features[torch.arange(len(accepted), device=features.device), index]
        eagle = self.eagle
        if eagle is None:
            return
        if self._drafts is None:  # nothing drafted: the last token's row is still to run (nothing accepted)
            eagle.run([[t] for t in self._last], [eagle.feature(old[b:b + 1]) for b in range(len(accepted))])
        else:
            eagle.keep([n + 1 for n in self._base])  # the last token's row was fed the target's feature
            eagle.run([d[:n] for d, n in zip(self._drafts, accepted, strict=True)],
                      [eagle.feature(features[b, :n]) for b, n in enumerate(accepted)])
        self._drafts = None

    def keep_rows(self, rows: Sequence[int]) -> None:
        import torch

        if self._first is not None:
            self._first = self._first.index_select(0, torch.tensor(list(rows), dtype=torch.long,
                                                                   device=self._first.device))
        self._last = [self._last[r] for r in rows] if self._last else []
        if self.eagle is not None:
            self.eagle.keep_rows(rows)

    def tidy(self, compact_at: float) -> None:
        """Nothing to squeeze: each row's head cache holds its sequence without holes."""
