"""A trained head as the draft backend of speculative decoding.

`HeadDraft` speaks the `decoders.backends.hf.Backend` protocol over a head and the target it drafts
for: it follows the target's cache (`KVRunner.follow`), and ``adopt_cache`` runs the head's layer
over the positions the target verified, fed the target's features from its `FeatureTap` (the
catch-up costs one small layer per position, no LM head, no target forward). ``forward`` drafts:
the first new row takes the target's feature of the position before it, each later row the
head's own output. Logits come back over the target's whole vocabulary (rows outside a reduced
draft vocabulary at -inf, so q is 0 there and sampling stays exact); the target always verifies
over its whole vocabulary, so output is unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from decoders.backends.features import FeatureTap
from decoders.backends.heads.eagle import EagleHead, visible

CHUNK = 256


class HeadDraft:
    """An EAGLE head drafting for ``target`` (a backend whose features it taps)."""

    n_layers = 1

    def __init__(self, head: EagleHead, target, embed: torch.Tensor, source: str = "eagle head"):
        c = head.config
        self.head = head.eval().requires_grad_(False)
        self.target = target
        self.embed = embed  # [vocab, hidden], the target's token embedding (shared)
        self.source = source
        self.device = target.device
        self.dtype = torch.float32
        self.vocab_size = target.vocab_size
        self.max_positions = target.max_positions
        self.weight_bytes = sum(p.numel() * p.element_size() for p in head.parameters())
        self.tap = FeatureTap(c.target_hidden, c.aux_layers if c.kind == "eagle3" else None, self.device)
        self.full_vocab = c.draft_vocab == self.vocab_size and bool(
            torch.equal(head.draft_ids, torch.arange(c.draft_vocab, device=head.draft_ids.device)))
        self._k = self._v = self._out = torch.zeros(0)
        self._capacity = 0
        self.length = 0
        self.valid = 0  # target rows 0 .. valid - 1 hold the features of this head's tokens

    # -- the Backend protocol ----------------------------------------------------------------
    @property
    def cached_length(self) -> int:
        return self.length

    def reset(self) -> None:
        self.length = self.valid = 0

    def crop(self, length: int) -> None:
        self.length = min(self.length, int(length))
        self.valid = min(self.valid, self.length)

    def compact(self, start: int, rows) -> None:
        index = torch.as_tensor(rows, dtype=torch.long, device=self.device).reshape(-1) + start
        count = int(index.numel())
        if count:
            with torch.inference_mode():
                for t in (self._k, self._v, self._out):
                    t[start:start + count] = t[index]
        self.length = start + count
        self.valid = min(self.valid, start)

    def adopt_reason(self, source) -> str | None:
        if source is not self.target:
            return "a head drafts only for the model whose features it reads"
        return None

    def adopt_cache(self, source, start: int, end: int) -> None:
        """Rows ``start .. end - 1`` from the target's verified features (no logits)."""
        if source is not self.target:
            raise ValueError("a head adopts only its own target's positions")
        tap = self.tap
        if end > tap.length:
            raise ValueError(f"the target's features reach slot {tap.length}, not {end}")
        with torch.inference_mode():
            ids = tap.ids[start:end]
            feats = self.head.feature(tap.feats[max(0, start - 1):end - 1])
            if start == 0:  # slot 0 has no feature before it; never attended to
                feats = torch.cat([feats.new_zeros(1, feats.shape[-1]), feats])
            self._rows(ids, feats, start)
        self.valid = end

    def forward(self, ids: torch.Tensor, keep: int, positions=None, mask=None) -> torch.Tensor:
        """Draft rows for ``ids`` after the cached slots; logits ``[keep, vocab]`` of the last ``keep``."""
        if positions is not None or mask is not None:
            raise NotImplementedError("a head drafts along a chain; tree positions are the target's to verify")
        ids = ids.reshape(-1)
        n = int(ids.numel())
        outs = []
        with torch.inference_mode():
            for i in range(n):  # each row's feature may be the row before's output
                slot = self.length
                prev = slot - 1
                if prev < 0:
                    feature = torch.zeros(1, self.head.config.hidden, device=self.device)
                elif prev < self.valid:
                    feature = self.head.feature(self.tap.feats[prev:slot])
                else:
                    feature = self._out[prev:slot]
                outs.append(self._rows(ids[i:i + 1], feature, slot))
            out = torch.cat(outs)[n - keep:]
            return self._full(self.head.logits(out))

    def tree_rows(self, ids: torch.Tensor, parents: list[int], positions: list[int],
                  ancestors: list[list[int]], prefix: int) -> torch.Tensor:
        """EAGLE-2's expansion: rows for tree nodes ``ids`` (1-D, on the device) after the cached
        slots, node i fed the output of slot ``parents[i]``, at RoPE position ``positions[i]``, and
        attending to the ``prefix`` slots before the tree, its ``ancestors[i]`` (tree slots) and itself.
        Logits ``[len(ids), vocab]``. Crop back to the prefix once the tree is drafted."""
        n = int(ids.numel())
        start, end = self.length, self.length + n
        with torch.inference_mode():
            self._reserve(end)
            emb = F.embedding(ids.reshape(-1), self.embed)
            feature = self._out[torch.tensor(parents, device=self.device)]
            attn_in, residual = self.head.inputs(emb, feature)
            q, k, v = self.head.qkv(attn_in, torch.tensor(positions, device=self.device))
            self._k[start:end], self._v[start:end] = k, v
            mask = torch.zeros(n, end, dtype=torch.bool)
            mask[:, 1:prefix] = True  # the prefix (slot 0 is never attended to)
            for i, row in enumerate(ancestors):
                mask[i, row] = True
                mask[i, start + i] = True
            out = self.head.finish(residual, self.head.attend(q, self._k[:end], self._v[:end],
                                                               mask.to(self.device)))
            self._out[start:end] = out
            self.length = end
            return self._full(self.head.logits(out))

    # -- internals ---------------------------------------------------------------------------
    def _rows(self, ids: torch.Tensor, feature: torch.Tensor, start: int) -> torch.Tensor:
        """Run the layer for slots ``start ..`` (tokens ``ids``, features ``feature``); cache them."""
        head = self.head
        n = int(ids.numel())
        end = start + n
        self._reserve(end)
        emb = F.embedding(ids, self.embed)
        attn_in, residual = head.inputs(emb, feature)
        slots = torch.arange(start, end, device=self.device)
        q, k, v = head.qkv(attn_in, slots)
        self._k[start:end], self._v[start:end] = k, v
        attn = head.attend(q, self._k[:end], self._v[:end], visible(slots, end))
        out = head.finish(residual, attn)
        self._out[start:end] = out
        self.length = end
        return out

    def _full(self, logits: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits spread over the target's vocabulary (-inf where it has no row)."""
        if self.full_vocab:
            return logits.float()
        full = torch.full((logits.shape[0], self.vocab_size), float("-inf"), device=self.device)
        full[:, self.head.draft_ids] = logits.float()
        return full

    def _reserve(self, needed: int) -> None:  # called inside inference mode
        if needed <= self._capacity:
            return
        c = self.head.config
        capacity = ((needed + CHUNK - 1) // CHUNK) * CHUNK
        k = torch.zeros(capacity, c.kv_heads, c.head_dim, device=self.device)
        v = torch.zeros_like(k)
        out = torch.zeros(capacity, c.hidden, device=self.device)
        if self._capacity:
            k[: self._capacity], v[: self._capacity], out[: self._capacity] = self._k, self._v, self._out
        self._k, self._v, self._out, self._capacity = k, v, out, capacity
