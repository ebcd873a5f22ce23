"""The target's hidden states, kept per cache slot for a trained draft head (EAGLE, Medusa).

A head drafts from the features the target computes anyway: EAGLE-1/2 and Medusa from the last
layer's state after the final norm (what the LM head reads), EAGLE-3 from the residual stream
entering three layers (low, middle, high). A `FeatureTap` attached to a target backend is written
by every forward the target runs (verification included) and follows the target's cache through
``crop``, ``compact`` and ``reset``, so row ``i`` always holds the feature of the token in cache
slot ``i``: no extra target forward, ever.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

CHUNK = 256


class FeatureTap:
    """Features ``[capacity, width]`` and token ids per target cache slot.

    ``layers`` None: the final-norm output (width ``hidden``); else the residual stream entering
    each listed layer, concatenated in that order (width ``hidden * len(layers)``).
    """

    def __init__(self, hidden: int, layers: Sequence[int] | None, device, dtype=torch.float32):
        self.layers = None if layers is None else tuple(int(i) for i in layers)
        self.hidden = hidden
        self.width = hidden * (1 if self.layers is None else len(self.layers))
        self.device, self.dtype = device, dtype
        self.feats = torch.zeros(0, self.width, device=device, dtype=dtype)
        self.ids = torch.zeros(0, dtype=torch.long, device=device)
        self.length = 0

    def write(self, start: int, ids: torch.Tensor, parts: Sequence[torch.Tensor]) -> None:
        """Rows ``start ..`` from a forward over ``ids`` (1-D): ``parts`` are ``[n, hidden]`` each."""
        n = int(ids.numel())
        end = start + n
        with torch.inference_mode():  # the tap's tensors are inference tensors, whoever calls
            if end > self.feats.shape[0]:
                self._grow(end)
            row = self.feats[start:end]
            for k, part in enumerate(parts):
                row[:, k * self.hidden:(k + 1) * self.hidden].copy_(part)
            self.ids[start:end].copy_(ids.reshape(-1))
        self.length = end

    def crop(self, length: int) -> None:
        self.length = min(self.length, max(0, int(length)))

    def compact(self, start: int, rows) -> None:
        """Keep slots ``start + rows[i]`` at ``start + i``, as the target's cache does."""
        index = torch.as_tensor(rows, dtype=torch.long, device=self.device).reshape(-1) + start
        count = int(index.numel())
        if count:
            with torch.inference_mode():
                self.feats[start:start + count] = self.feats[index]
                self.ids[start:start + count] = self.ids[index]
        self.length = start + count

    def reset(self) -> None:
        self.length = 0

    def _grow(self, needed: int) -> None:
        capacity = ((needed + CHUNK - 1) // CHUNK) * CHUNK
        feats = torch.zeros(capacity, self.width, device=self.device, dtype=self.dtype)
        ids = torch.zeros(capacity, dtype=torch.long, device=self.device)
        feats[: self.feats.shape[0]] = self.feats
        ids[: self.ids.shape[0]] = self.ids
        self.feats, self.ids = feats, ids
