"""A trained head drafting for B rows at once (the batch path's `decoders.methods.batch.head_draft`).

`BatchedEagle` is `decoders.backends.heads.draft.HeadDraft` with one cache per row: keys and values
``[B, capacity, kv_heads, head_dim]``, row b's slot s holding its position s (the head's RoPE
position is its slot, as at batch 1), each row at its own length. ``run`` puts m rows of every row
through the head's layer in one call (a row with fewer pads its tail; a pad's slots are rewritten
before any real query reads them, since a query reads only slots up to its own); ``draft`` makes
each row's greedy chain, the first step fed the target's feature, each later one the head's own
output, the tokens staying on the device until the chain is done (one host transfer).

`BatchedMedusa`: Medusa's heads on each row's one feature, head i guessing the row's draft i.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from decoders.backends.heads.eagle import EagleHead
from decoders.backends.heads.medusa import MedusaHeads

CHUNK = 256


class BatchedEagle:
    """An EAGLE head's layer over B rows, each with its own cache (see the module's note)."""

    def __init__(self, head: EagleHead, embed: torch.Tensor, device):
        self.head = head.eval().requires_grad_(False)
        self.embed = embed
        self.device = device
        self.lengths: list[int] = []
        self._k = self._v = torch.zeros(0)
        self._capacity = 0

    @property
    def rows(self) -> int:
        return len(self.lengths)

    def reset(self, rows: int) -> None:
        self.lengths = [0] * rows
        self._k = self._v = torch.zeros(0)
        self._capacity = 0

    def feature(self, target: torch.Tensor) -> torch.Tensor:
        """The target's features as the layer's feature input (EAGLE-3: through ``fc``)."""
        with torch.inference_mode():
            return self.head.feature(target)

    def run(self, ids: Sequence[Sequence[int]], feats: Sequence[torch.Tensor]) -> None:
        """Row b's tokens ``ids[b]`` (maybe none) at its next slots, fed ``feats[b]`` ``[len, hidden]``
        (the layer's feature input of each): cached, the row's length moved on."""
        counts = [len(row) for row in ids]
        m = max(counts, default=0)
        if m == 0:
            return
        hidden = self.head.config.hidden
        tokens = torch.zeros((self.rows, m), dtype=torch.long)
        feature = torch.zeros((self.rows, m, hidden), device=self.device)
        for b, (row, f) in enumerate(zip(ids, feats, strict=True)):
            if row:
                tokens[b, : len(row)] = torch.tensor(list(row), dtype=torch.long)
                feature[b, : len(row)] = f
        self._layer(tokens.to(self.device), feature)
        self.lengths = [n + c for n, c in zip(self.lengths, counts, strict=True)]

    def draft(self, last: Sequence[int], feats: torch.Tensor, steps: int) -> list[list[int]]:
        """Each row's greedy chain of ``steps`` tokens after its token ``last[b]`` (fed ``feats[b]``,
        ``[B, hidden]``); the cache then holds ``last`` and every draft but the last (each row's
        length moved on by ``steps``; `keep` rolls it back)."""
        ids = torch.tensor(list(last), dtype=torch.long, device=self.device).view(-1, 1)
        feature = feats.view(self.rows, 1, -1)
        drafts = []
        with torch.inference_mode():
            for _ in range(steps):
                out = self._layer(ids, feature)  # [B, 1, hidden]
                self.lengths = [n + 1 for n in self.lengths]
                ids = self.head.draft_ids[self.head.logits(out[:, 0]).argmax(-1)].view(-1, 1)
                drafts.append(ids)
                feature = out
            return torch.cat(drafts, dim=1).tolist() if drafts else [[] for _ in last]

    def keep(self, lengths: Sequence[int]) -> None:
        """Row b keeps its first ``lengths[b]`` slots (a rollback of rejected drafts)."""
        self.lengths = [min(n, int(k)) for n, k in zip(self.lengths, lengths, strict=True)]

    def keep_rows(self, rows: Sequence[int]) -> None:
        index = torch.tensor([int(r) for r in rows], dtype=torch.long, device=self.device)
        if self._capacity:
            self._k, self._v = self._k.index_select(0, index), self._v.index_select(0, index)
        self.lengths = [self.lengths[int(r)] for r in rows]

    def _layer(self, ids: torch.Tensor, feature: torch.Tensor) -> torch.Tensor:
        """The layer for ``ids [B, m]`` at each row's next m slots (not moved on): ``[B, m, hidden]``."""
        head, c = self.head, self.head.config
        rows, m = ids.shape
        start = torch.tensor(self.lengths, dtype=torch.long, device=self.device)
        slots = start.view(-1, 1) + torch.arange(m, device=self.device).view(1, -1)  # [B, m]
        end = int(start.max()) + m
        with torch.inference_mode():
            self._reserve(end)
            attn_in, residual = head.inputs(F.embedding(ids, self.embed), feature)
            q, k, v = head.qkv(attn_in.reshape(rows * m, -1), slots.reshape(-1))
            index = torch.arange(rows, device=self.device).view(-1, 1)
            self._k[index, slots] = k.view(rows, m, c.kv_heads, c.head_dim)
            self._v[index, slots] = v.view(rows, m, c.kv_heads, c.head_dim)
            keys = torch.arange(end, device=self.device).view(1, 1, -1)
            query = slots.view(rows, m, 1)
            mask = ((keys <= query) & (keys >= 1)) | (keys == query)  # slot 0 only itself, as `visible`
            group = c.heads // c.kv_heads
            attn = F.scaled_dot_product_attention(
                q.view(rows, m, c.heads, c.head_dim).transpose(1, 2),
                self._k[:, :end].repeat_interleave(group, 2).transpose(1, 2),
                self._v[:, :end].repeat_interleave(group, 2).transpose(1, 2),
                attn_mask=mask.view(rows, 1, m, end), scale=c.head_dim**-0.5)
            return head.finish(residual, attn.transpose(1, 2).reshape(rows, m, c.heads * c.head_dim))

    def _reserve(self, needed: int) -> None:  # called inside inference mode
        if needed <= self._capacity:
            return
        c = self.head.config
        capacity = max(self._capacity, ((needed + CHUNK - 1) // CHUNK) * CHUNK)
        k = torch.zeros(self.rows, capacity, c.kv_heads, c.head_dim, device=self.device)
        v = torch.zeros_like(k)
        if self._capacity:
            k[:, : self._capacity], v[:, : self._capacity] = self._k, self._v
        self._k, self._v, self._capacity = k, v, capacity


class BatchedMedusa:
    """Medusa's heads over B rows: row b's draft i is head i on the row's feature."""

    def __init__(self, heads: MedusaHeads):
        self.heads = heads.eval().requires_grad_(False)
        self.max_draft = heads.n_heads

    def draft(self, feats: torch.Tensor, steps: int) -> list[list[int]]:
        """Each row's ``steps`` guesses (at most one per head) from ``feats`` ``[B, hidden]``."""
        steps = min(steps, self.max_draft)
        if steps <= 0:
            return [[] for _ in range(feats.shape[0])]
        with torch.inference_mode():
            return torch.stack([self.heads(feats, i).argmax(-1) for i in range(steps)], dim=1).tolist()


def batched_head(draft) -> tuple[BatchedEagle | BatchedMedusa, tuple[int, ...] | None] | None:
    """The batched form of a loaded head draft (`decoders.backends.heads.head_draft`'s backend) and
    the target states it reads (None: after the final norm; else the layers whose inputs it reads);
    None for any other draft."""
    from decoders.backends.heads.draft import HeadDraft
    from decoders.backends.heads.medusa import MedusaDraft

    if isinstance(draft, MedusaDraft):
        return BatchedMedusa(draft.heads), None
    if isinstance(draft, HeadDraft):
        return BatchedEagle(draft.head, draft.embed, draft.device), draft.tap.layers
    return None
