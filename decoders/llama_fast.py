"""A lean decoder for Llama-shaped models (Llama, Mistral, Qwen2), in the style of gpt-fast.

transformers spends much of a one-token step on per-module Python, dynamic-cache bookkeeping,
mask construction and `F.linear` on ``[out, in]`` weights. This backend keeps the same maths
(float32 RMSNorm, RoPE, grouped-query attention, SiLU MLP) but runs it as a flat loop over
prepared tensors:

* q/k/v and gate/up weights fused and pre-transposed to ``[in, out]``, so each projection is
  one ``x @ W`` (measurably faster on CPU than ``F.linear``); residual adds ride on ``addmm``;
* the attention softmax scale folded into the q weights, RoPE tables precomputed per position;
* a static KV cache per layer, ``[kv_heads, capacity, head_dim]``, grown in chunks;
* grouped-query attention by grouping the query heads of each kv head into rows of one
  batched matmul (no repeated keys or values);
* the LM head (a transposed copy, tied or not) applied to the last ``keep`` positions only.

`early_exit(n)` gives a backend over the first ``n`` layers that shares every weight tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from decoders.backend import count_weight_bytes  # noqa: F401  (re-exported for callers)

SUPPORTED_TYPES = ("llama", "qwen2", "mistral")
#: RoPE variants whose frequencies do not depend on the sequence length (so a table is exact).
STATIC_ROPE_TYPES = ("default", "linear", "llama3")
#: Positions added to the KV cache (and RoPE tables) each time it has to grow.
CACHE_CHUNK = 512


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _rope_type(config) -> str | None:
    """The RoPE type in either the transformers 5 (`rope_parameters`) or 4 (`rope_scaling`) form."""
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return params.get("rope_type", params.get("type", "default"))


def unsupported_reason(model) -> str | None:
    """Why `LlamaBackend` cannot run ``model`` exactly, or None when it can."""
    config = _text_config(getattr(model, "config", None))
    if config is None:
        return "no config"
    kind = getattr(config, "model_type", None)
    if kind not in SUPPORTED_TYPES:
        return f"model_type {kind!r} is not one of {SUPPORTED_TYPES}"
    base = getattr(model, "model", None)
    if base is None or not hasattr(base, "layers") or not hasattr(base, "embed_tokens"):
        return "no model.layers / model.embed_tokens"
    if getattr(config, "hidden_act", None) != "silu":
        return f"hidden_act {getattr(config, 'hidden_act', None)!r} is not silu"
    rope = _rope_type(config)
    if rope not in STATIC_ROPE_TYPES:
        return f"rope type {rope!r} is not one of {STATIC_ROPE_TYPES}"
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        return "attention or MLP bias"
    if kind == "mistral":
        window = getattr(config, "sliding_window", None)
        if window is not None and window < config.max_position_embeddings:
            return f"sliding window {window} is active"
    if "sliding_attention" in (getattr(config, "layer_types", None) or ()):
        return "sliding-window layers"
    if getattr(config, "use_sliding_window", False):
        return "use_sliding_window"
    if not type(base.norm).__name__.endswith("RMSNorm"):
        return f"final norm is {type(base.norm).__name__}, not RMSNorm"
    for layer in base.layers:
        attn, mlp = layer.self_attn, layer.mlp
        if not all(type(n).__name__.endswith("RMSNorm") for n in (layer.input_layernorm, layer.post_attention_layernorm)):
            return "a layer norm is not RMSNorm"
        if attn.o_proj.bias is not None or any(p.bias is not None for p in (mlp.gate_proj, mlp.up_proj, mlp.down_proj)):
            return "o_proj or MLP bias"
        qkv_bias = [p.bias is not None for p in (attn.q_proj, attn.k_proj, attn.v_proj)]
        if any(qkv_bias) and not (kind == "qwen2" and all(qkv_bias)):
            return "q/k/v bias outside Qwen2"
        if any(type(m).__name__.endswith("RMSNorm") for m in (getattr(attn, "q_norm", None), getattr(attn, "k_norm", None))):
            return "q/k norms"
    return None


def supports(model) -> bool:
    """Whether `LlamaBackend.from_hf(model)` runs ``model`` exactly (see `unsupported_reason`)."""
    try:
        return unsupported_reason(model) is None
    except AttributeError:
        return False


@dataclass(frozen=True)
class _Layer:
    """One decoder layer's prepared weights (all ``[in, out]`` contiguous)."""

    attn_norm: torch.Tensor  # [hidden]
    wqkv: torch.Tensor  # [hidden, (heads + 2 kv_heads) * head_dim], q columns pre-scaled
    bqkv: torch.Tensor | None  # [(heads + 2 kv_heads) * head_dim] (Qwen2), q part pre-scaled
    wo: torch.Tensor  # [heads * head_dim, hidden]
    mlp_norm: torch.Tensor  # [hidden]
    wgate_up: torch.Tensor  # [hidden, 2 * intermediate]
    wdown: torch.Tensor  # [intermediate, hidden]


@dataclass(frozen=True)
class _Weights:
    """Everything a forward reads; shared between a backend and its early-exit views."""

    embed: torch.Tensor  # [vocab, hidden], the model's own embedding (lookup only)
    layers: tuple[_Layer, ...]
    norm: torch.Tensor  # [hidden]
    head: torch.Tensor  # [hidden, vocab], a transposed copy of the LM head
    inv_freq: torch.Tensor  # [head_dim // 2], float32
    rope_scale: float  # the "attention scaling" some RoPE types apply to cos/sin
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    max_positions: int


def _prepare(model) -> _Weights:
    """Fuse, scale and transpose the weights of a transformers Llama-shaped model."""
    config = _text_config(model.config)
    base = model.model
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    q_scale = head_dim**-0.5  # folded into q (exact when head_dim is a power of four)

    def t(w):
        return w.detach().t().contiguous()

    layers = []
    for layer in base.layers:
        attn, mlp = layer.self_attn, layer.mlp
        wq = attn.q_proj.weight.detach() * q_scale
        wqkv = torch.cat([wq, attn.k_proj.weight.detach(), attn.v_proj.weight.detach()]).t().contiguous()
        bqkv = None
        if attn.q_proj.bias is not None:
            bqkv = torch.cat([attn.q_proj.bias.detach() * q_scale, attn.k_proj.bias.detach(), attn.v_proj.bias.detach()])
        layers.append(
            _Layer(
                attn_norm=layer.input_layernorm.weight.detach(),
                wqkv=wqkv,
                bqkv=bqkv,
                wo=t(attn.o_proj.weight),
                mlp_norm=layer.post_attention_layernorm.weight.detach(),
                wgate_up=torch.cat([mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach()]).t().contiguous(),
                wdown=t(mlp.down_proj.weight),
            )
        )
    rotary = base.rotary_emb
    return _Weights(
        embed=base.embed_tokens.weight.detach(),
        layers=tuple(layers),
        norm=base.norm.weight.detach(),
        head=t(model.get_output_embeddings().weight),
        inv_freq=rotary.inv_freq.detach().float().clone(),
        rope_scale=float(getattr(rotary, "attention_scaling", 1.0)),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        eps=float(config.rms_norm_eps),
        max_positions=int(config.max_position_embeddings),
    )


class LlamaBackend:
    """A `decoders.backend.Backend` for Llama / Mistral / Qwen2 models with a static KV cache."""

    def __init__(self, weights: _Weights, n_layers: int | None = None, max_positions: int | None = None):
        w = weights
        self.weights = w
        self.n_layers = len(w.layers) if n_layers is None else int(n_layers)
        if not 0 <= self.n_layers <= len(w.layers):
            raise ValueError(f"n_layers must be in 0..{len(w.layers)}, got {n_layers}")
        self._layers = w.layers[: self.n_layers]
        self.device = w.embed.device
        self.dtype = w.embed.dtype
        self.vocab_size = int(w.head.shape[1])
        self.max_positions = int(min(max_positions or w.max_positions, w.max_positions))
        self.weight_bytes = sum(
            t.numel() * t.element_size()
            for layer in self._layers
            for t in (layer.attn_norm, layer.wqkv, layer.bqkv, layer.wo, layer.mlp_norm, layer.wgate_up, layer.wdown)
            if t is not None
        ) + sum(t.numel() * t.element_size() for t in (w.norm, w.head))
        self._group = w.heads // w.kv_heads
        self._q_width = w.heads * w.head_dim
        self._k_width = w.kv_heads * w.head_dim
        self._fused_norm = self.dtype == torch.float32
        self._length = 0
        self._capacity = 0
        self._k: list[torch.Tensor] = []
        self._v: list[torch.Tensor] = []
        self._cos = self._sin = None

    @classmethod
    def from_hf(cls, model, max_positions: int | None = None) -> LlamaBackend:
        """Build from a transformers LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM."""
        reason = unsupported_reason(model)
        if reason is not None:
            raise TypeError(f"LlamaBackend cannot run {type(model).__name__}: {reason}")
        with torch.no_grad():
            return cls(_prepare(model), max_positions=max_positions)

    # -- the Backend protocol ----------------------------------------------------------------
    @property
    def cached_length(self) -> int:
        return self._length

    def reset(self) -> None:
        """Forget every cached position (the buffers stay allocated for the next sequence)."""
        self._length = 0

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions; later slots are simply overwritten next time."""
        self._length = max(0, min(int(length), self._length))

    def early_exit(self, layers: int) -> LlamaBackend:
        """The first ``layers`` layers + final norm + head, on the same weight tensors."""
        return LlamaBackend(self.weights, n_layers=layers, max_positions=self.max_positions)

    def forward(self, ids: torch.Tensor, keep: int) -> torch.Tensor:
        """Append ``ids`` after the cached positions; float32 logits of the last ``keep``."""
        n = int(ids.shape[-1])
        start = self._length
        end = start + n
        if ids.dim() != 1 or n == 0:
            raise ValueError(f"ids must be a non-empty 1-D tensor, got shape {tuple(ids.shape)}")
        if not 1 <= keep <= n:
            raise ValueError(f"keep must be in 1..{n}, got {keep}")
        if end > self._capacity:
            self._grow(end)
        with torch.inference_mode():
            logits = self._forward(ids, start, n, keep)
        self._length = end
        return logits

    # -- internals ---------------------------------------------------------------------------
    def _grow(self, needed: int) -> None:
        """Enlarge the KV cache and RoPE tables to hold ``needed`` positions (whole chunks)."""
        if needed > self.max_positions:
            raise ValueError(f"{needed} positions exceed max_positions={self.max_positions}")
        w = self.weights
        capacity = min(self.max_positions, max(needed, self._capacity * 2, CACHE_CHUNK))
        capacity = min(self.max_positions, math.ceil(capacity / CACHE_CHUNK) * CACHE_CHUNK)
        shape = (w.kv_heads, capacity, w.head_dim)
        with torch.inference_mode():
            for cache in (self._k, self._v):
                for i in range(self.n_layers):
                    fresh = torch.empty(shape, dtype=self.dtype, device=self.device)
                    if i < len(cache):
                        fresh[:, : self._length] = cache[i][:, : self._length]
                        cache[i] = fresh
                    else:
                        cache.append(fresh)
            # exactly transformers' table: cat(f, f).cos() * scale with f = position * inv_freq
            positions = torch.arange(capacity, device=self.device, dtype=torch.float32)
            freqs = positions[:, None] * w.inv_freq.to(self.device)[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = (emb.cos() * w.rope_scale).to(self.dtype)
            sin = (emb.sin() * w.rope_scale).to(self.dtype)
            half = w.head_dim // 2
            # rotate_half(x) * sin == flip_halves(x) * [-sin_lo, sin_hi]
            self._cos = cos[:, None, :].contiguous()
            self._sin = torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)[:, None, :].contiguous()
        self._capacity = capacity

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """RMSNorm as transformers computes it: in float32, weight applied after casting back."""
        w = self.weights
        if self._fused_norm:
            return F.rms_norm(x, weight.shape, weight, w.eps)
        return weight * F.rms_norm(x.float(), weight.shape, None, w.eps).to(x.dtype)

    def _forward(self, ids: torch.Tensor, start: int, n: int, keep: int) -> torch.Tensor:
        w = self.weights
        end = start + n
        kvh, hd, group = w.kv_heads, w.head_dim, self._group
        qw, kw = self._q_width, self._k_width
        rope_w = qw + kw
        half = hd // 2
        cos = self._cos[start:end]
        sin = self._sin[start:end]
        # new token t may see every cached position and new positions up to itself
        mask = None
        if n > 1:
            mask = torch.ones(n, end, dtype=torch.bool, device=self.device).triu_(start + 1)
            mask = torch.zeros(n, end, dtype=self.dtype, device=self.device).masked_fill_(mask, float("-inf"))
            mask = mask.repeat_interleave(group, dim=0)  # rows are (token, group member)

        x = F.embedding(ids, w.embed)  # [n, hidden]
        for layer, k_cache, v_cache in zip(self._layers, self._k, self._v):
            h = self._norm(x, layer.attn_norm)
            qkv = h @ layer.wqkv if layer.bqkv is None else torch.addmm(layer.bqkv, h, layer.wqkv)
            # RoPE on q and k together, in place: x*cos + rotate_half(x)*sin
            qk = qkv[:, :rope_w].view(n, -1, 2, half)
            rotated = qk.flip(2)
            qk = qk.view(n, -1, hd)
            qk.mul_(cos).addcmul_(rotated.view(n, -1, hd), sin)
            # append k and v to the cache ([kv_heads, position, head_dim])
            k_cache[:, start:end] = qkv[:, qw:rope_w].view(n, kvh, hd).transpose(0, 1)
            v_cache[:, start:end] = qkv[:, rope_w:].view(n, kvh, hd).transpose(0, 1)
            keys = k_cache[:, :end]
            values = v_cache[:, :end]
            # queries grouped by kv head: [kv_heads, n * group, head_dim], rows (token, member)
            q = qkv[:, :qw].view(n, kvh, group * hd).transpose(0, 1).reshape(kvh, n * group, hd)
            scores = q @ keys.transpose(1, 2)  # the 1/sqrt(head_dim) is folded into q
            if mask is not None:
                scores += mask
            attn = torch.softmax(scores, dim=-1) @ values  # [kv_heads, n * group, head_dim]
            attn = attn.view(kvh, n, group * hd).transpose(0, 1).reshape(n, qw)
            x = torch.addmm(x, attn, layer.wo)
            h = self._norm(x, layer.mlp_norm)
            gate, up = (h @ layer.wgate_up).chunk(2, dim=-1)
            x = torch.addmm(x, F.silu(gate).mul_(up), layer.wdown)
        x = self._norm(x[n - keep :], w.norm)
        return (x @ w.head).float()
