"""The static key/value cache of `decoders.backends.llama_fast.LlamaBackend`, with its RoPE table.

One preallocated tensor per layer, ``[2 (k, v), kv_heads, capacity, head_dim]``, grown in whole
chunks; positions past ``length`` are free slots that the next forward overwrites, so cropping
is a change of ``length`` only. The RoPE table covers every position up to ``capacity``.
``compact`` keeps a chosen subset of the last positions (a tree verify keeping its accepted
path) by one index copy per layer.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from decoders.backends.hf import checked_rows
from decoders.backends.host import to_device

#: Positions added to the cache (and RoPE table) each time it has to grow.
CACHE_CHUNK = 512


class KVCache:
    """Static per-layer key/value storage plus the RoPE rotations for its positions.

    ``layers[i]`` is layer ``i``'s ``[2, kv_heads, capacity, head_dim]`` tensor; the first
    ``length`` positions are valid. ``rope`` is ``[capacity, 1, head_dim // 2]`` complex
    (cos + i sin) in float32/float64, else ``[capacity, 2, 1, head_dim]`` real pairs
    ``(cos, cos)`` and ``(-sin, sin)`` for head dims stored as RoPE pairs.
    """

    def __init__(
        self,
        n_layers: int,
        kv_heads: int,
        head_dim: int,
        max_positions: int,
        dtype: torch.dtype,
        device: torch.device,
        inv_freq: torch.Tensor,
        rope_scale: float = 1.0,
        chunk: int = CACHE_CHUNK,
    ):
        self.n_layers = int(n_layers)
        self.kv_heads = int(kv_heads)
        self.head_dim = int(head_dim)
        self.max_positions = int(max_positions)
        self.dtype = dtype
        self.device = device
        self.inv_freq = inv_freq
        self.rope_scale = float(rope_scale)
        self.chunk = int(chunk)
        self.complex_rope = dtype in (torch.float32, torch.float64)
        self.length = 0
        self.capacity = 0
        self.layers: list[torch.Tensor] = []
        self.rope: torch.Tensor | None = None

    # -- size --------------------------------------------------------------------------------
    def reserve(self, needed: int) -> None:
        """Make room for ``needed`` positions (storage and RoPE table)."""
        if needed > self.capacity:
            self._grow(needed)

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions; later slots are simply overwritten next time."""
        self.length = max(0, min(int(length), self.length))

    def reset(self) -> None:
        """Forget every position (the buffers stay allocated for the next sequence)."""
        self.length = 0

    def compact(self, start: int, rows: Sequence[int] | torch.Tensor) -> None:
        """Keep positions ``start + rows[i]``, moved to ``start + i``; drop the rest after ``start``.

        ``rows`` ascend and lie in ``0 .. length - start - 1`` (checked when given as a sequence
        of ints; a device tensor is taken as it is, without a host sync). Positions before
        ``start`` stay; ``length`` becomes ``start + len(rows)``.
        """
        start = int(start)
        if not 0 <= start <= self.length:
            raise ValueError(f"start must be in 0..{self.length}, got {start}")
        if isinstance(rows, torch.Tensor):
            rows = rows.reshape(-1)
            count = int(rows.numel())
            identity = False
        else:
            rows = checked_rows(rows, self.length - start)
            count = len(rows)
            identity = rows == list(range(count))
        if count and not identity:  # a prefix of the new positions needs no copy
            index = (rows.to(self.device) if isinstance(rows, torch.Tensor) else to_device(rows, self.device)) + start
            with torch.inference_mode():
                for kv in self.layers:  # advanced indexing reads a copy before the write
                    kv[:, :, start : start + count] = kv[:, :, index]
        self.length = start + count

    def layout_mismatch(self, other: KVCache) -> str | None:
        """Why this cache cannot take positions from ``other`` (`copy_from`), or None when it can:
        the same heads, head size, dtype and device, and no more layers than ``other``."""
        for name in ("kv_heads", "head_dim", "dtype", "device"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                return f"{name} differs ({mine} here, {theirs} there)"
        if self.n_layers > other.n_layers:
            return f"{self.n_layers} layers here, {other.n_layers} there"
        return None

    def copy_from(self, other: KVCache, start: int, end: int) -> None:
        """Take positions ``start .. end - 1`` of ``other``'s first ``n_layers`` layers (its own
        values replace this cache's there); ``length`` becomes ``end``. Positions before ``start``
        must already be valid here."""
        start, end = int(start), int(end)
        if not 0 <= start <= min(self.length, end) or end > other.length:
            raise ValueError(f"cannot copy positions {start}..{end - 1}: this cache holds {self.length}, "
                             f"the source {other.length}")
        reason = self.layout_mismatch(other)
        if reason is not None:
            raise ValueError(f"the caches differ in layout: {reason}")
        self.reserve(end)
        if end > start:
            with torch.inference_mode():
                for mine, theirs in zip(self.layers, other.layers, strict=False):
                    mine[:, :, start:end] = theirs[:, :, start:end]
        self.length = end

    def _grow(self, needed: int) -> None:
        """Enlarge the storage and RoPE table to hold ``needed`` positions (whole chunks)."""
        if needed > self.max_positions:
            raise ValueError(f"{needed} positions exceed max_positions={self.max_positions}")
        capacity = max(needed, self.capacity * 2, self.chunk)
        capacity = min(self.max_positions, math.ceil(capacity / self.chunk) * self.chunk)
        with torch.inference_mode():
            for i in range(self.n_layers):
                fresh = torch.empty((2, self.kv_heads, capacity, self.head_dim), dtype=self.dtype, device=self.device)
                if i < len(self.layers):
                    fresh[:, :, : self.length] = self.layers[i][:, :, : self.length]
                    self.layers[i] = fresh
                else:
                    self.layers.append(fresh)
            # transformers' values: cos/sin(position * inv_freq) * scale, in float32, then cast
            positions = torch.arange(capacity, device=self.device, dtype=torch.float32)
            freqs = positions[:, None] * self.inv_freq.to(self.device)[None, :]
            cos = (freqs.cos() * self.rope_scale).to(self.dtype)
            sin = (freqs.sin() * self.rope_scale).to(self.dtype)
            if self.complex_rope:  # [capacity, 1, head_dim // 2] complex: cos + i sin
                self.rope = torch.complex(cos, sin)[:, None, :]
            else:  # [capacity, 2, 1, head_dim]: pairs (cos, cos) and (-sin, sin)
                self.rope = torch.stack(
                    (torch.stack((cos, cos), dim=-1).flatten(1), torch.stack((-sin, sin), dim=-1).flatten(1)), dim=1
                )[:, :, None, :].contiguous()
        self.capacity = capacity

    # -- RoPE --------------------------------------------------------------------------------
    def rope_rows(self, start: int, end: int, positions: torch.Tensor | None = None) -> torch.Tensor:
        """The table rows for the new tokens: positions ``start .. end - 1`` or ``positions``."""
        rope = self.rope
        assert rope is not None, "reserve() builds the table before any forward"
        return rope[start:end] if positions is None else rope[positions]

    def rotate(self, qk: torch.Tensor, rope: torch.Tensor) -> None:
        """RoPE in place on ``qk`` ``[n, heads + kv_heads, head_dim]`` (dims in pairs) with the
        rows ``rope`` from `rope_rows`: ``(a, b) -> (a cos - b sin, b cos + a sin)``, i.e.
        transformers' ``x * cos + rotate_half(x) * sin`` on the reordered dims."""
        n, m, hd = qk.shape
        if self.complex_rope:
            torch.view_as_complex(qk.view(n, m, hd // 2, 2)).mul_(rope)
        else:
            swapped = qk.view(n, m, hd // 2, 2).flip(-1).view(n, m, hd)
            qk.mul_(rope[:, 0]).addcmul_(swapped, rope[:, 1])
