"""Medusa heads (Cai et al. 2024): k extra LM heads on the target's last hidden state.

Head ``i`` (0-based) reads the target's final-norm state at the last verified position ``t`` and
guesses token ``t + 2 + i`` (the target's own LM head gives ``t + 1``): each is a few ResBlocks
(``x + SiLU(W x + b)``) and an LM head. It does not read the tokens it drafted before, so a chain
of its guesses costs one small matmul per head and nothing else.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from decoders.backends.features import FeatureTap


class ResBlock(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.silu(self.linear(x))


class MedusaHeads(nn.Module):
    def __init__(self, hidden: int, vocab: int, n_heads: int, n_layers: int):
        super().__init__()
        self.hidden, self.vocab, self.n_heads, self.n_layers = hidden, vocab, n_heads, n_layers
        self.heads = nn.ModuleList(
            nn.Sequential(*[ResBlock(hidden) for _ in range(n_layers)], nn.Linear(hidden, vocab, bias=False))
            for _ in range(n_heads))

    def forward(self, feature: torch.Tensor, index: int) -> torch.Tensor:
        return self.heads[index](feature)


class MedusaDraft:
    """Medusa heads as the draft backend: row ``j`` of a draft is head ``j - valid`` on the target's
    feature at slot ``valid - 1`` (the last position the target verified for this draft)."""

    n_layers = 1

    def __init__(self, heads: MedusaHeads, target, source: str = "medusa heads"):
        self.heads = heads.eval().requires_grad_(False)
        self.target = target
        self.source = source
        self.device = target.device
        self.dtype = torch.float32
        self.vocab_size = target.vocab_size
        self.max_positions = target.max_positions
        self.max_draft = heads.n_heads  # a draft longer than the heads has nothing to guess with
        self.weight_bytes = sum(p.numel() * p.element_size() for p in heads.parameters())
        self.tap = FeatureTap(heads.hidden, None, self.device)
        self.length = self.valid = 0

    @property
    def cached_length(self) -> int:
        return self.length

    def reset(self) -> None:
        self.length = self.valid = 0

    def crop(self, length: int) -> None:
        self.length = min(self.length, int(length))
        self.valid = min(self.valid, self.length)

    def compact(self, start: int, rows) -> None:
        self.length = start + len(rows)
        self.valid = min(self.valid, start)

    def adopt_reason(self, source) -> str | None:
        return None if source is self.target else "Medusa heads draft only for the model whose features they read"

    def adopt_cache(self, source, start: int, end: int) -> None:
        self.length = self.valid = end

    def forward(self, ids: torch.Tensor, keep: int, positions=None, mask=None) -> torch.Tensor:
        if positions is not None or mask is not None:
            raise NotImplementedError("Medusa heads draft along a chain here")
        n = int(ids.numel())
        if self.valid == 0:
            raise ValueError("Medusa heads need the target's feature of a verified position first")
        rows = []
        with torch.inference_mode():
            feature = self.tap.feats[self.valid - 1:self.valid]
            for slot in range(self.length + n - keep, self.length + n):
                index = min(slot - self.valid, self.heads.n_heads - 1)
                rows.append(self.heads(feature, index))
        self.length += n
        return torch.cat(rows).float()
