"""A lean decoder for Llama-shaped models (Llama, Mistral, Qwen2), in the style of gpt-fast.

transformers spends much of a one-token step on per-module Python, cache bookkeeping, mask
construction and `F.linear` on ``[out, in]`` weights. This backend computes the same function
(float32 RMSNorm, RoPE, grouped-query SDPA, SiLU MLP) as one flat loop over prepared tensors:

* q/k/v and gate/up weights fused and pre-transposed to ``[in, out]``: a one-token projection
  is one ``addmm`` (faster on CPU than ``F.linear``), residual adds ride on ``addmm`` too;
* in float32 the RMSNorm weights are folded into the next matrix, so a one-token norm is one
  dot product and a scalar ``alpha`` for the projection (no normalised copy);
* q/k head dims reordered into RoPE pairs, so RoPE is one in-place complex multiply by a
  precomputed per-position table;
* a static KV cache per layer, ``[2, kv_heads, capacity, head_dim]``, grown in chunks, with
  the RoPE table (`decoders.backends.kv_cache.KVCache`);
* optional explicit positions and a mask among the new tokens (tree verification), with
  ``compact`` to keep the accepted path's cache entries;
* the LM head (a transposed copy, tied or not) applied to the last ``keep`` positions only;
* on CPU in float32, verify-sized forwards (2..`PACKED_MAX_TOKENS` tokens) run on oneDNN-packed
  copies of the weights, built on first use: MKL's small-batch GEMM on plain weights costs
  1.5-2.5x a one-token step for 2-11 tokens, the packed weights 1.45-1.9x. They cost one more
  copy of the weights in memory (``packed_multi_token=False`` saves it).

On the bundled SmolLM2-135M (2 cores) a one-token step takes about 0.7x the time of a
transformers ``generate()`` token; see scripts/profile_backend.py. Float32 logits stay within
1e-4 of transformers' (their own float32 error against float64 is about 7e-5).

`early_exit(n)` gives a backend over the first ``n`` layers that shares every weight tensor.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F

from decoders.backends.features import FeatureTap
from decoders.backends.host import move
from decoders.backends.kv_cache import CACHE_CHUNK, KVCache
from decoders.backends.llama_support import (  # noqa: F401 (re-exported: the fast backend's own names)
    STATIC_ROPE_TYPES,
    SUPPORTED_TYPES,
    _rope_type,
    _text_config,
    supports,
    unsupported_reason,
)
from decoders.backends.llama_weights import PlainMatmuls, Weights, packed_matmuls, prepare
from decoders.backends.static_step import StaticStep
from decoders.backends.static_step import _Fallback as StepFallback

#: Forwards of 2..PACKED_MAX_TOKENS tokens (verify steps) use the oneDNN-packed weights. Longer
#: ones (prefill) are compute-bound, where MKL on plain weights is as fast and its float32
#: rounding is closer to transformers' (oneDNN accumulates each dot product sequentially).
PACKED_MAX_TOKENS = 32
#: ``F.scaled_dot_product_attention(enable_gqa=...)`` arrived in torch 2.5.
_SDPA_GQA = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)


def attend(qkv: torch.Tensor, kv: torch.Tensor, start: int, end: int, heads: int, kv_heads: int, head_dim: int,
           scale: float, mask: torch.Tensor | None, causal: bool) -> torch.Tensor:
    """One layer's attention: write the new rows' k and v (``qkv[:, q_width:]``) into the layer's
    cache ``kv`` at ``start:end``, and attend the new rows' (rotated) queries to positions ``:end``.
    Returns ``[n, heads * head_dim]``."""
    n, q_width, group = qkv.shape[0], heads * head_dim, heads // kv_heads
    kv[:, :, start:end] = qkv[:, q_width:].view(n, 2, kv_heads, head_dim).permute(1, 2, 0, 3)
    keys, values = kv[None, 0, :, :end], kv[None, 1, :, :end]
    if n == 1:  # no mask needed: the query heads of each kv head act as its query rows
        q = qkv[:, :q_width].view(1, kv_heads, group, head_dim)
        # reshape, not view: CUDA's memory-efficient kernel returns its output with heads
        # and rows transposed in memory (not contiguous)
        return F.scaled_dot_product_attention(q, keys, values, scale=scale).reshape(1, q_width)
    q = qkv[:, :q_width].view(n, heads, head_dim).transpose(0, 1)[None]
    if _SDPA_GQA:
        attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=causal, scale=scale,
                                              enable_gqa=True)
    else:
        keys, values = keys.repeat_interleave(group, 1), values.repeat_interleave(group, 1)
        attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=causal, scale=scale)
    return attn[0].transpose(0, 1).reshape(n, q_width)


class LlamaBackend:
    """A `decoders.backends.hf.Backend` for Llama / Mistral / Qwen2 models with a static KV cache.

    ``packed_multi_token`` (default on) runs forwards of 2+ tokens on oneDNN-packed weights
    when on CPU in float32; turn it off to save the memory of that second weight copy.
    """

    tap: FeatureTap | None = None  # the hidden states a draft head reads (decoders.backends.features)
    step: StaticStep | None = None  # the one-token step at static shapes (None: off; a subclass may not set it)

    def __init__(
        self,
        weights: Weights,
        n_layers: int | None = None,
        max_positions: int | None = None,
        packed_multi_token: bool = True,
        step_mode: str = "off",
    ):
        w = weights
        self._set_shape(w, n_layers, max_positions)
        self.packed_multi_token = packed_multi_token
        # one-token steps at static shapes, replayed from a CUDA graph (`decoders.backends.static_step`)
        self.step_mode = step_mode
        self.step = None if step_mode == "off" else StaticStep(self, step_mode)
        self.weight_bytes = sum(
            t.numel() * t.element_size()
            for layer in self._layers
            for t in (layer.attn_norm, layer.wqkv, layer.wo, layer.mlp_norm, layer.wgate_up, layer.wdown)
            if t is not None
        ) + sum(t.numel() * t.element_size() for t in (w.norm, w.head) if t is not None)
        self._plain = PlainMatmuls(w)
        # one-token norms as a Python scalar: cheap on CPU, a device sync elsewhere
        self._scalar_norm = w.folded and self.device.type == "cpu"
        self.cache = KVCache(self.n_layers, w.kv_heads, w.head_dim, self.max_positions, self.dtype, self.device,
                             w.inv_freq, w.rope_scale, chunk=CACHE_CHUNK)

    def _set_shape(self, w: Weights, n_layers: int | None, max_positions: int | None) -> None:
        """The weights, the first ``n_layers`` layers (all when None), device, dtype and sizes."""
        self.weights = w
        # the backend this one is a draft of (early exit, quantized copy): its cache can be adopted
        self.draft_of: LlamaBackend | None = None
        self.n_layers = len(w.layers) if n_layers is None else int(n_layers)
        if not 0 <= self.n_layers <= len(w.layers):
            raise ValueError(f"n_layers must be in 0..{len(w.layers)}, got {n_layers}")
        self._layers = w.layers[: self.n_layers]
        self.device = w.embed.device
        self.dtype = w.embed.dtype
        self.vocab_size = int(w.head.shape[1])
        self.max_positions = int(min(max_positions or w.max_positions, w.max_positions))

    @classmethod
    def from_hf(cls, model, max_positions: int | None = None, packed_multi_token: bool = True,
                step_mode: str = "off") -> LlamaBackend:
        """Build from a transformers LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM.

        ``step_mode`` "graph" replays one-token steps from a CUDA graph (CUDA only), "eager" runs
        that static-shape step without a graph (a check on CPU), "off" the regular step."""
        reason = unsupported_reason(model)
        if reason is not None:
            raise TypeError(f"LlamaBackend cannot run {type(model).__name__}: {reason}")
        with torch.no_grad():
            return cls(prepare(model), max_positions=max_positions, packed_multi_token=packed_multi_token,
                       step_mode=step_mode)

    # -- the Backend protocol ----------------------------------------------------------------
    @property
    def cached_length(self) -> int:
        return self.cache.length

    def reset(self) -> None:
        """Forget every cached position (the buffers stay allocated for the next sequence)."""
        self.cache.reset()
        if self.tap is not None:
            self.tap.reset()

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions; later slots are simply overwritten next time."""
        self.cache.crop(length)
        if self.tap is not None:
            self.tap.crop(length)

    def compact(self, start: int, rows) -> None:
        """Keep cache positions ``start + rows[i]`` at ``start + i`` (see `KVCache.compact`)."""
        self.cache.compact(start, rows)
        if self.tap is not None:
            self.tap.compact(start, rows)

    def twin(self) -> LlamaBackend:
        """This backend again, on the same weight tensors (a subclass's own too), with a cache of
        its own: the baseline that steps in alternation with a method run."""
        other = self.early_exit(self.n_layers)
        other.draft_of = self.draft_of
        return other

    def early_exit(self, layers: int) -> LlamaBackend:
        """The first ``layers`` layers + final norm + head, on the same weight tensors."""
        exit_ = LlamaBackend(self.weights, layers, self.max_positions, self.packed_multi_token, self.step_mode)
        exit_.draft_of = self.draft_of or self
        return exit_

    def adopt_reason(self, source) -> str | None:
        """Why this backend cannot take cache positions from ``source`` (`adopt_cache`), or None.

        Only a draft of ``source`` may (an early exit, whose layers are the target's first ones, or
        a quantized copy of it): another model's keys and values would mean nothing here."""
        target = self.draft_of
        if source is None or target is None or target is not source:
            return "it is not a draft built from that model"
        return self.cache.layout_mismatch(target.cache)

    def adopt_cache(self, source, start: int, end: int) -> None:
        """Take ``source``'s cached positions ``start .. end - 1`` (keys and values of the layers
        this backend runs) in place of computing them; positions before ``start`` stay."""
        target = self.draft_of
        if target is None or target is not source:  # the layout is checked by the copy
            raise ValueError("cannot adopt that cache: it is not a draft built from that model")
        self.cache.copy_from(target.cache, start, end)

    def forward(self, ids: torch.Tensor, keep: int, positions: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Append ``ids`` after the cached positions; float32 logits of the last ``keep``.

        ``positions`` (1-D long, one per token) replaces the RoPE positions ``cached_length ..``;
        ``mask`` (bool ``[n, n]``, True where new token i may attend to new token j, diagonal
        True) replaces the causal pattern among the new tokens. Every new token attends to all
        cached positions. A one-token forward needs no mask and ignores it.
        """
        n = int(ids.shape[-1])
        cache = self.cache
        start = cache.length
        end = start + n
        if ids.dim() != 1 or n == 0:
            raise ValueError(f"ids must be a non-empty 1-D tensor, got shape {tuple(ids.shape)}")
        if not 1 <= keep <= n:
            raise ValueError(f"keep must be in 1..{n}, got {keep}")
        needed = end
        if positions is not None:
            positions = positions.reshape(-1).to(dtype=torch.long)
            if positions.numel() != n:
                raise ValueError(f"positions must hold {n} entries, got {positions.numel()}")
            # the RoPE table must reach them: read on the host copy (the runner passes one), so
            # that a device never waits here
            needed = max(end, int(positions.max()) + 1)
            positions = move(positions, self.device)
        if mask is not None:
            if tuple(mask.shape) != (n, n) or mask.dtype != torch.bool:
                raise ValueError(f"mask must be a bool tensor of shape ({n}, {n}), "
                                 f"got {mask.dtype} {tuple(mask.shape)}")
            mask = None if n == 1 else move(mask, self.device)
        if needed > cache.capacity:
            cache.reserve(needed)
        with torch.inference_mode():
            logits = None
            step = self.step
            if step is not None and n == 1 and positions is None and self.tap is None:
                try:
                    logits = step(ids, start)
                except StepFallback:
                    logits = None
            if logits is None:
                packed = self.packed_multi_token and 1 < n <= PACKED_MAX_TOKENS
                matmuls = packed_matmuls(self.weights) if packed else self._plain
                logits = self._forward(ids, start, n, keep, matmuls, positions, mask)
        cache.length = end
        return logits

    # -- internals ---------------------------------------------------------------------------
    @property
    def _kv(self) -> list[torch.Tensor]:
        """Per-layer cache tensors ``[2, kv_heads, capacity, head_dim]`` (the cache's own list)."""
        return self.cache.layers

    @property
    def _capacity(self) -> int:
        return self.cache.capacity

    def _prenorm(self, x: torch.Tensor, weight: torch.Tensor | None) -> tuple[torch.Tensor, float]:
        """RMSNorm of the hidden state for the next projection, as ``(input, alpha)``.

        Folded norms (weight None) on CPU with one row return ``x`` itself and the scalar
        ``1 / rms(x)`` for the projection's ``addmm(alpha=...)``: one dot product instead of a
        normalised copy. Otherwise transformers' order: float32 normalise, cast, then weight.
        """
        if weight is None:
            if self._scalar_norm and x.shape[0] == 1:
                flat = x.view(-1)
                return x, 1.0 / math.sqrt(float(torch.dot(flat, flat)) / flat.shape[0] + self.weights.eps)
            return F.rms_norm(x, (x.shape[-1],), None, self.weights.eps), 1.0
        return weight * F.rms_norm(x.float(), weight.shape, None, self.weights.eps).to(x.dtype), 1.0

    def _forward(self, ids: torch.Tensor, start: int, n: int, keep: int, mm, positions: torch.Tensor | None = None,
                 tree_mask: torch.Tensor | None = None) -> torch.Tensor:
        w = self.weights
        cache = self.cache
        end = start + n
        heads, kvh, hd = w.heads, w.kv_heads, w.head_dim
        rope_width = (heads + kvh) * hd
        scale = hd**-0.5
        rope = cache.rope_rows(start, end, positions)
        rotate = cache.rotate
        # new token t sees every cached position and the new ones up to itself (or as masked).
        # A prefill (nothing cached, causal) passes no mask but is_causal: an explicit mask keeps
        # CUDA on the O(n^2)-memory math kernel, is_causal allows flash attention.
        mask = None
        causal = n > 1 and start == 0 and tree_mask is None
        if n > 1 and not causal:
            mask = torch.ones(n, end, dtype=torch.bool, device=self.device)
            if tree_mask is None:
                mask.tril_(start)
            else:
                mask[:, start:] = tree_mask

        x = F.embedding(ids, w.embed)  # [n, hidden], a fresh tensor: residual adds go in place
        tap = self.tap
        taken: dict[int, torch.Tensor | None] = {}
        if tap is not None and tap.layers is not None:
            taken = dict.fromkeys(tap.layers)
        for i, (layer, kv) in enumerate(zip(self._layers, cache.layers, strict=False)):
            if i in taken:  # the residual stream entering layer i (EAGLE-3's features)
                taken[i] = x.clone()
            h, alpha = self._prenorm(x, layer.attn_norm)
            qkv = mm.qkv(i, h, alpha)  # [n, (heads + 2 kv_heads) * head_dim]
            rotate(qkv[:, :rope_width].view(n, heads + kvh, hd), rope)
            attn = attend(qkv, kv, start, end, heads, kvh, hd, scale, mask, causal)
            x = mm.out(i, x, attn)
            h, alpha = self._prenorm(x, layer.mlp_norm)
            gate, up = mm.gate_up(i, h, alpha).chunk(2, dim=-1)
            x = mm.down(i, x, F.silu(gate).mul_(up))
        if tap is not None:
            # each tapped layer is one this model runs, so each was filled above
            tap.write(start, ids, cast("list[torch.Tensor]", list(taken.values())) if tap.layers is not None else
                      [F.rms_norm(x, (x.shape[-1],), w.final_norm, w.eps)])
        last = x[n - keep :]
        if w.norm is None:  # folded into the head
            h = F.rms_norm(last, (last.shape[-1],), None, w.eps)
        else:
            h, _ = self._prenorm(last, w.norm)
        return mm.head(h).float()
