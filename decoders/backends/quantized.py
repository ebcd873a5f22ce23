"""A weight-only low-bit copy of a Llama-shaped model: the quantized self-draft.

`QuantizedLlamaBackend` is `decoders.backends.llama_fast.LlamaBackend` with its decoder-layer matrices
in weight-only int4 (group-wise, asymmetric), run through torch's packed kernels
(``_weight_int4pack_mm_for_cpu`` on CPU, ``_weight_int4pack_mm`` on CUDA); no kernel here is
written by hand. It drafts for the model it was built from (same tokenizer, no download): the
verifier keeps the output exactly the target's, the draft only has to agree with it often.

* Layer weights are quantized from the model's own (unfolded) matrices in groups of ``group``
  along the input dimension, ``w = (q - 8) * scale + zero``. With ``group=32`` on a model
  loaded from a Q4_1 GGUF this lands on the file's own blocks: Q4_1 stores
  ``w = d * q + m`` per 32 weights with q spanning 0..15, so the block's min and max give back
  ``m`` and ``d`` up to the rounding of the scales to bfloat16.
* Activations enter the kernel in bfloat16 (float32 activations are exact but about 4x slower
  on CPU); the residual stream, norms, attention and the KV cache stay in the model's dtype.
* The LM head is the target's own (``head="model"``, shared, no copy: the measured choice), or
  a bfloat16 copy, or int4 like the layers.
* The embedding table is the target's, shared (a lookup reads one row).

Kernel limits (CPU, torch 2.x): each matrix's output width divisible by 16 (by 8 on CUDA), its
input width by the group size, the group one of 32, 64, 128, 256. `unsupported_reason` names
the first matrix that breaks them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol, cast

import torch
import torch.nn.functional as F

from decoders.backends.kv_cache import CACHE_CHUNK, KVCache
from decoders.backends.llama_fast import LlamaBackend
from decoders.backends.llama_fast import unsupported_reason as llama_unsupported_reason
from decoders.backends.llama_support import _text_config
from decoders.backends.llama_weights import Layer, Weights, pair_rope_dims

if TYPE_CHECKING:
    from decoders.backends.fp16_cpu import Fp16LlamaBackend

SELF_DRAFT_KINDS = ("int4",)
GROUP_SIZES = (32, 64, 128, 256)
DEFAULT_GROUP = 32
HEADS = ("model", "bfloat16", "int4")
DEFAULT_HEAD = "model"


def _n_multiple(device: torch.device) -> int:
    return 8 if device.type == "cuda" else 16


def _kernel_ops(device: torch.device):
    """(convert, matmul) int4 ops for ``device``; DecodeError-free: raises RuntimeError with why."""
    aten = torch.ops.aten
    if device.type == "cpu":
        return aten._convert_weight_to_int4pack_for_cpu, aten._weight_int4pack_mm_for_cpu
    if device.type == "cuda":
        return aten._convert_weight_to_int4pack, aten._weight_int4pack_mm
    raise RuntimeError(f"torch has no packed int4 matmul kernel for device {device.type!r} (only cpu and cuda)")


def _matrix_shapes(model) -> list[tuple[str, int, int]]:
    """(name, out, in) of every matrix the draft quantizes: fused q/k/v, o, fused gate/up, down."""
    return config_matrix_shapes(model.config)


def config_matrix_shapes(config) -> list[tuple[str, int, int]]:
    """`_matrix_shapes` from a model config alone (no weights loaded)."""
    config = _text_config(config)
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    hidden, inter = config.hidden_size, config.intermediate_size
    return [("q/k/v", (heads + 2 * kv_heads) * head_dim, hidden), ("o_proj", hidden, heads * head_dim),
            ("gate/up", 2 * inter, hidden), ("down_proj", hidden, inter)]


def unsupported_reason(model, kind: str = "int4", group: int = DEFAULT_GROUP, device: torch.device | None = None,
                       head: str = DEFAULT_HEAD) -> str | None:
    """Why an int4 self-draft of ``model`` cannot be built, or None when it can."""
    if kind not in SELF_DRAFT_KINDS:
        return f"unknown self-draft kind {kind!r}; choose one of {', '.join(SELF_DRAFT_KINDS)}"
    if group not in GROUP_SIZES:
        return f"group size {group} is not one of {GROUP_SIZES}"
    reason = llama_unsupported_reason(model)
    if reason is not None:
        return f"the quantized draft runs Llama-shaped models only: {reason}"
    device = device or next(model.parameters()).device
    try:
        _kernel_ops(device)
    except RuntimeError as err:
        return str(err)
    shapes = _matrix_shapes(model)
    if head == "int4":
        rows = int(model.get_output_embeddings().weight.shape[0])
        shapes.append(("lm_head", rows, _text_config(model.config).hidden_size))
    return shapes_reason(shapes, group, _n_multiple(device))


def shapes_reason(shapes: list[tuple[str, int, int]], group: int = DEFAULT_GROUP, multiple: int = 16) -> str | None:
    """Which of ``shapes`` (name, out, in) the packed int4 kernel cannot take, and why; None: all."""
    for name, out, inp in shapes:
        if inp % group:
            return (f"{name} reads {inp} inputs, not a multiple of the int4 group size {group} "
                    f"(the kernel quantizes whole groups along the input)")
        if out % multiple:
            return f"{name} has {out} outputs, not a multiple of {multiple} (the packed int4 kernel's tile)"
    return None


def int4_matrix_bytes(out: int, inp: int, group: int) -> int:
    """Bytes one ``[out, in]`` matrix takes as packed int4: two codes a byte, and a bfloat16
    scale and zero per group of ``group`` inputs (as `Int4Linear` holds them)."""
    return out * inp // 2 + (inp // group) * out * 2 * 2


def draft_bytes(model, group: int = DEFAULT_GROUP, head: str = DEFAULT_HEAD) -> tuple[int, int]:
    """(kept, working): the bytes an int4 draft of ``model`` adds beside it (packed layer
    matrices and scales, its LM head unless shared, one chunk of its KV cache), and the most it
    needs at once on top while packing (float32 and int32 copies of the largest matrix and its
    concatenated source). The embedding, norms and a shared head are the model's: nothing more."""
    config = _text_config(model.config)
    layers = int(config.num_hidden_layers)
    shapes = _matrix_shapes(model)
    kept = layers * sum(int4_matrix_bytes(out, inp, group) for _, out, inp in shapes)
    vocab, hidden = int(model.get_output_embeddings().weight.shape[0]), int(config.hidden_size)
    if head == "int4":
        kept += int4_matrix_bytes(vocab, hidden, group)
        shapes = shapes + [("lm_head", vocab, hidden)]
    elif head == "bfloat16":
        kept += vocab * hidden * 2
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    positions = min(CACHE_CHUNK, int(getattr(config, "max_position_embeddings", 0) or CACHE_CHUNK))
    element = next(model.parameters()).element_size()
    kept += layers * 2 * kv_heads * positions * head_dim * element
    working = max(out * inp for _, out, inp in shapes) * (4 + 4 + element)
    return kept, working


def quantize_int4(weight: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-wise asymmetric int4 of ``weight`` ``[out, in]``: (q int32 0..15 ``[out, in]``,
    scales and zeros float32 ``[in / group, out, 2]``) with ``w ~ (q - 8) * scale + zero``."""
    out, inp = weight.shape
    w = weight.detach().float().reshape(out, inp // group, group)
    low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
    scale = ((high - low) / 15).clamp(min=1e-8)
    q = ((w - low) / scale).round_().clamp_(0, 15).to(torch.int32).reshape(out, inp)
    zero = low + 8 * scale
    scales_zeros = torch.stack([scale.reshape(out, -1), zero.reshape(out, -1)], dim=-1).transpose(0, 1).contiguous()
    return q, scales_zeros


class Int4Linear:
    """``x @ W.T`` for an ``[out, in]`` weight held as packed int4 (bfloat16 activations)."""

    def __init__(self, weight: torch.Tensor, group: int):
        device = weight.device
        convert, self._mm = _kernel_ops(device)
        q, scales_zeros = quantize_int4(weight.cpu(), group)
        if device.type == "cuda":  # two 4-bit values per byte; K in tiles of inner_k_tiles * 16
            q = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
            inner_k_tiles = next(t for t in (8, 4, 2) if weight.shape[1] % (16 * t) == 0)
            self.packed = convert(q.to(device), inner_k_tiles)
        else:
            self.packed = convert(q, 1)
        self.scales_zeros = scales_zeros.to(device=device, dtype=torch.bfloat16)
        self.group = group
        self.out_features = int(weight.shape[0])
        self.nbytes = self.packed.numel() * self.packed.element_size() + self.scales_zeros.numel() * 2

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self._mm(x.to(torch.bfloat16), self.packed, self.group, self.scales_zeros)


class _Head(Protocol):
    """The draft's LM head: `Int4Linear`, `_DenseHead`, or a float16 target's packed head."""

    nbytes: int

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


class _DenseHead:
    """The LM head as a dense ``[in, out]`` matrix (the target's own, or a bfloat16 copy)."""

    def __init__(self, weight: torch.Tensor, dtype: torch.dtype):
        self.weight = weight if weight.dtype == dtype else weight.to(dtype)
        self.nbytes = self.weight.numel() * self.weight.element_size()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.weight.dtype) @ self.weight


class _QuantizedMatmuls:
    """The projections of `LlamaBackend._forward` on int4 weights (see `PlainMatmuls`).

    Inputs arrive normalised in bfloat16 (`QuantizedLlamaBackend._prenorm`; ``alpha`` is always
    1). q/k/v come back in the residual's dtype (RoPE, the cache and attention stay there); the
    gate/up product stays bfloat16 through SiLU into the down projection, whose product is added
    to the residual.
    """

    def __init__(self, layers, head, dtype: torch.dtype):
        self.layers = layers  # per layer (qkv, bqkv or None, o, gate_up, down)
        self.head_matmul = head
        self.dtype = dtype

    def qkv(self, i: int, h: torch.Tensor, alpha: float) -> torch.Tensor:
        qkv, bias = self.layers[i][:2]
        out = qkv(h)
        return out.to(self.dtype) if bias is None else torch.add(bias, out)

    def out(self, i: int, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return x.add_(self.layers[i][2](a))

    def gate_up(self, i: int, h: torch.Tensor, alpha: float) -> torch.Tensor:
        return self.layers[i][3](h)

    def down(self, i: int, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return x.add_(self.layers[i][4](a))

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self.head_matmul(x)


def _quantized_layers(model, group: int, device: torch.device):
    """Unfolded norms plus int4 matrices (q/k in RoPE pairs, as `llama_fast.prepare` orders them)."""
    config = _text_config(model.config)
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    norms, matmuls = [], []
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        q = pair_rope_dims(attn.q_proj.weight.detach(), heads, head_dim)
        k = pair_rope_dims(attn.k_proj.weight.detach(), kv_heads, head_dim)
        wqkv = torch.cat([q, k, attn.v_proj.weight.detach()])
        if attn.q_proj.bias is not None:
            bqkv = torch.cat([pair_rope_dims(attn.q_proj.bias.detach(), heads, head_dim),
                              pair_rope_dims(attn.k_proj.bias.detach(), kv_heads, head_dim),
                              attn.v_proj.bias.detach()])
        else:
            bqkv = None
        gate_up = torch.cat([mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach()])
        norms.append((layer.input_layernorm.weight.detach(), layer.post_attention_layernorm.weight.detach()))
        matmuls.append((Int4Linear(wqkv, group), bqkv, Int4Linear(attn.o_proj.weight.detach(), group),
                        Int4Linear(gate_up, group), Int4Linear(mlp.down_proj.weight.detach(), group)))
    return norms, matmuls


class QuantizedLlamaBackend(LlamaBackend):
    """A `LlamaBackend` whose layer matrices are weight-only int4 (the quantized self-draft).

    Built beside a target `LlamaBackend` by `from_target`: it shares the target's embedding,
    final norm and (by default) LM head, and keeps its own KV cache. Every forward, one token
    or many, runs on the int4 weights.
    """

    def __init__(self, weights: Weights, matmuls: _QuantizedMatmuls, n_layers: int | None = None,
                 max_positions: int | None = None, kind: str = "int4", group: int = DEFAULT_GROUP,
                 head: str = DEFAULT_HEAD):
        w = weights
        self._set_shape(w, n_layers, max_positions)
        self.packed_multi_token = False  # every forward runs on the int4 matmuls
        self.kind, self.group, self.head = kind, group, head
        self._matmuls = matmuls
        # LlamaBackend._plain is inferred as PlainMatmuls (llama_fast.py); any object with its methods serves
        self._plain = matmuls  # type: ignore[assignment]
        self._scalar_norm = False
        layer_bytes = sum(m.nbytes for layer in matmuls.layers[: self.n_layers]
                          for m in (layer[0], layer[2], layer[3], layer[4]))
        norm_bytes = sum(t.numel() * t.element_size()
                         for layer in self._layers for t in (layer.attn_norm, layer.mlp_norm) if t is not None)
        self.weight_bytes = layer_bytes + norm_bytes + matmuls.head_matmul.nbytes
        # what the draft holds beside the target: its int4 matrices, and its head unless shared
        self.own_bytes = layer_bytes + (matmuls.head_matmul.nbytes if head != "model" else 0)
        self.cache = KVCache(self.n_layers, w.kv_heads, w.head_dim, self.max_positions, self.dtype, self.device,
                             w.inv_freq, w.rope_scale, chunk=CACHE_CHUNK)

    @classmethod
    def from_target(cls, target: LlamaBackend, model, kind: str = "int4", group: int = DEFAULT_GROUP,
                    head: str = DEFAULT_HEAD) -> QuantizedLlamaBackend:
        """The int4 draft of ``model`` (the transformers module behind ``target``), sharing the
        target backend's embedding, final norm and LM head. ValueError says why it cannot be built."""
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        reason = unsupported_reason(model, kind, group, target.device, head)
        if reason is not None:
            raise ValueError(reason)
        tw = target.weights
        # a float16-weight target (`decoders.backends.fp16_cpu`) holds its head packed: shared as it is
        shared_head = getattr(target, "shared_head", None)
        with torch.no_grad():
            norms, layers = _quantized_layers(model, group, target.device)
            # only a float16-weight target has a shared head, and with it dense_head
            dense_head = (cast("Fp16LlamaBackend", target).dense_head() if shared_head is not None and head != "model"
                          else tw.head)
            head_matmul: _Head
            if head == "int4":
                head_matmul = Int4Linear(dense_head.t().contiguous(), group)
            elif head == "bfloat16":
                head_matmul = _DenseHead(dense_head, torch.bfloat16)
            else:
                head_matmul = shared_head or _DenseHead(tw.head, tw.head.dtype)
        placeholder = tw.head.new_empty(0)
        shells = tuple(Layer(attn_norm=a, wqkv=placeholder, bqkv=placeholder, wo=placeholder, mlp_norm=m,
                              wgate_up=placeholder, bgate_up=placeholder, wdown=placeholder)
                       for (a, m), b in zip(norms, layers, strict=False))
        weights = replace(tw, layers=shells, packed={})
        draft = cls(weights, _QuantizedMatmuls(layers, head_matmul, tw.embed.dtype), max_positions=target.max_positions,
                    kind=kind, group=group, head=head)
        draft.draft_of = target
        return draft

    def _prenorm(self, x: torch.Tensor, weight: torch.Tensor | None) -> tuple[torch.Tensor, float]:
        """RMSNorm with its weight in one op, cast to the kernel's bfloat16 (the final norm, folded
        into a shared float32 head, returns the model's dtype as `LlamaBackend` does)."""
        if weight is None:
            return super()._prenorm(x, weight)
        if x.dtype in (torch.float32, torch.float64):  # weight * normalised, transformers' order
            return F.rms_norm(x, weight.shape, weight, self.weights.eps).to(torch.bfloat16), 1.0
        return super()._prenorm(x, weight)[0].to(torch.bfloat16), 1.0

    def early_exit(self, layers: int) -> QuantizedLlamaBackend:
        exit_ = QuantizedLlamaBackend(self.weights, self._matmuls, layers, self.max_positions, self.kind,
                                      self.group, self.head)
        exit_.draft_of = self.draft_of
        return exit_
