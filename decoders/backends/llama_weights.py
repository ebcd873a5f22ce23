"""The fast Llama backend's weights: each decoder layer's matrices fused, norm-folded and
transposed once from a transformers model (`prepare`), and the two ways a forward multiplies by
them (plain MKL matmuls, or oneDNN-packed copies for verify-sized forwards, built on first use).
See `decoders.backends.llama_fast` for why each is shaped as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from decoders.backends.llama_support import _text_config


@dataclass(frozen=True)
class Layer:
    """One decoder layer's prepared weights (matrices ``[in, out]`` contiguous).

    When the norms are folded (float32/float64), ``attn_norm`` / ``mlp_norm`` are None and their
    weights are multiplied into the rows of ``wqkv`` / ``wgate_up`` instead.
    """

    attn_norm: torch.Tensor | None  # [hidden]
    wqkv: torch.Tensor  # [hidden, (heads + 2 kv_heads) * head_dim], q/k dims in RoPE pairs
    bqkv: torch.Tensor  # [(heads + 2 kv_heads) * head_dim], zeros unless Qwen2
    wo: torch.Tensor  # [heads * head_dim, hidden]
    mlp_norm: torch.Tensor | None  # [hidden]
    wgate_up: torch.Tensor  # [hidden, 2 * intermediate]
    bgate_up: torch.Tensor  # [2 * intermediate] zeros, so that addmm can scale the product
    wdown: torch.Tensor  # [intermediate, hidden]


@dataclass(frozen=True)
class Weights:
    """Everything a forward reads; shared between a backend and its early-exit views."""

    embed: torch.Tensor  # [vocab, hidden], the model's own embedding (lookup only)
    layers: tuple[Layer, ...]
    norm: torch.Tensor | None  # [hidden]; None when folded into ``head``
    head: torch.Tensor  # [hidden, vocab], a transposed copy of the LM head
    inv_freq: torch.Tensor  # [head_dim // 2], float32
    rope_scale: float  # the "attention scaling" some RoPE types apply to cos/sin
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    max_positions: int
    final_norm: torch.Tensor | None = None  # [hidden], the final norm's weight even when folded (draft heads' features)
    # oneDNN-packed copies for multi-token forwards, built on first use (see `packed_matmuls`)
    packed: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def folded(self) -> bool:
        return self.norm is None


def pair_rope_dims(w: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    """Reorder each head's output dims from transformers' halves (x0..x31, x32..x63) to pairs
    (x0, x32, x1, x33, ...), so RoPE becomes one complex multiply. Applied to q and k alike it
    leaves every q.k product unchanged."""
    half = head_dim // 2
    return w.view(heads, 2, half, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def prepare(model, contiguous: bool = True) -> Weights:
    """Fuse, fold and transpose the weights of a transformers Llama-shaped model.

    ``contiguous=False`` leaves each matrix an ``[in, out]`` view of ``[out, in]`` memory (the
    fold's product keeps its input's layout): a reader that wants ``[out, in]`` back (the float16
    packer) then copies nothing. Copying 122 matrices twice cost 1.5 s of a 10 s start (AVX2).

    In float32/float64 each RMSNorm weight is multiplied into the matrix that reads its
    output: ``(w * x_hat) @ W == x_hat @ (w[:, None] * W)``, which leaves one-token norms a
    scalar (see `LlamaBackend._prenorm`). In lower precision rounding ``w * W`` to 8 or 11
    bits would move results away from transformers', so the norms stay as they are there.
    """
    config = _text_config(model.config)
    base = model.model
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    dtype = base.embed_tokens.weight.dtype
    fold = dtype in (torch.float32, torch.float64)

    def transposed(weight, norm=None):
        """``[out, in]`` -> ``[in, out]`` contiguous, rows scaled by the norm when folding."""
        w = weight.detach().t()
        w = w * norm.detach()[:, None] if fold and norm is not None else w
        return w.contiguous() if contiguous else w

    layers = []
    for layer in base.layers:
        attn, mlp = layer.self_attn, layer.mlp
        q = pair_rope_dims(attn.q_proj.weight.detach(), heads, head_dim)
        k = pair_rope_dims(attn.k_proj.weight.detach(), kv_heads, head_dim)
        wqkv = torch.cat([q, k, attn.v_proj.weight.detach()])
        if attn.q_proj.bias is not None:
            bqkv = torch.cat([
                pair_rope_dims(attn.q_proj.bias.detach(), heads, head_dim),
                pair_rope_dims(attn.k_proj.bias.detach(), kv_heads, head_dim),
                attn.v_proj.bias.detach(),
            ])
        else:
            bqkv = wqkv.new_zeros(wqkv.shape[0])
        wgate_up = torch.cat([mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach()])
        layers.append(
            Layer(
                attn_norm=None if fold else layer.input_layernorm.weight.detach(),
                wqkv=transposed(wqkv, layer.input_layernorm.weight),
                bqkv=bqkv,
                wo=transposed(attn.o_proj.weight),
                mlp_norm=None if fold else layer.post_attention_layernorm.weight.detach(),
                wgate_up=transposed(wgate_up, layer.post_attention_layernorm.weight),
                bgate_up=wgate_up.new_zeros(wgate_up.shape[0]),
                wdown=transposed(mlp.down_proj.weight),
            )
        )
    rotary = base.rotary_emb
    return Weights(
        embed=base.embed_tokens.weight.detach(),
        layers=tuple(layers),
        norm=None if fold else base.norm.weight.detach(),
        head=transposed(model.get_output_embeddings().weight, base.norm.weight),
        inv_freq=rotary.inv_freq.detach().float().clone(),
        rope_scale=float(getattr(rotary, "attention_scaling", 1.0)),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        eps=float(config.rms_norm_eps),
        max_positions=int(config.max_position_embeddings),
        final_norm=base.norm.weight.detach(),
    )


class PlainMatmuls:
    """Projections as ``addmm`` on the ``[in, out]`` weights: the fastest for one token.

    ``alpha`` scales the product: a one-token RMSNorm arrives as a scalar instead of a
    normalised copy of the hidden state.
    """

    def __init__(self, weights: Weights):
        self.layers = weights.layers
        self.head_weight = weights.head

    def qkv(self, i: int, h: torch.Tensor, alpha: float) -> torch.Tensor:
        layer = self.layers[i]
        return torch.addmm(layer.bqkv, h, layer.wqkv, alpha=alpha)

    def out(self, i: int, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return torch.addmm(x, a, self.layers[i].wo)

    def gate_up(self, i: int, h: torch.Tensor, alpha: float) -> torch.Tensor:
        layer = self.layers[i]
        return torch.addmm(layer.bgate_up, h, layer.wgate_up, alpha=alpha)

    def down(self, i: int, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return torch.addmm(x, a, self.layers[i].wdown)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.head_weight


class PackedMatmuls:
    """Projections on oneDNN-packed weights (CPU, float32): far cheaper for 2+ tokens.

    ``mkldnn._reorder_linear_weight`` / ``mkldnn._linear_pointwise`` are the ops torch.compile's
    CPU freezing pass uses; the batch-size hint 16 packs a layout that serves any row count.
    Inputs arrive normalised (``alpha`` is always 1 here).
    """

    BATCH_HINT = 16

    def __init__(self, weights: Weights):
        pack = torch.ops.mkldnn._reorder_linear_weight
        hint = self.BATCH_HINT
        # _linear_pointwise takes [out, in] weights, like F.linear
        self.layers = [
            (
                pack(layer.wqkv.t().contiguous(), hint),
                layer.bqkv,
                pack(layer.wo.t().contiguous(), hint),
                pack(layer.wgate_up.t().contiguous(), hint),
                pack(layer.wdown.t().contiguous(), hint),
            )
            for layer in weights.layers
        ]
        self.head_weight = pack(weights.head.t().contiguous(), hint)
        self._linear = torch.ops.mkldnn._linear_pointwise

    def qkv(self, i: int, h: torch.Tensor, alpha: float) -> torch.Tensor:
        w, b = self.layers[i][:2]
        return self._linear(h, w, b, "none", [], "")

    def out(self, i: int, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return x.add_(self._linear(a, self.layers[i][2], None, "none", [], ""))

    def gate_up(self, i: int, h: torch.Tensor, alpha: float) -> torch.Tensor:
        return self._linear(h, self.layers[i][3], None, "none", [], "")

    def down(self, i: int, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return x.add_(self._linear(a, self.layers[i][4], None, "none", [], ""))

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self._linear(x, self.head_weight, None, "none", [], "")


def packed_matmuls(weights: Weights) -> PackedMatmuls | PlainMatmuls:
    """The multi-token projections for ``weights``: packed once where oneDNN can run them."""
    if "matmuls" not in weights.packed:
        matmuls = None
        on_cpu = weights.embed.device.type == "cpu" and weights.embed.dtype == torch.float32
        if on_cpu and torch.backends.mkldnn.is_available():
            try:
                with torch.inference_mode():
                    matmuls = PackedMatmuls(weights)
            except (RuntimeError, AttributeError):  # a torch build without these ops
                matmuls = None
        weights.packed["matmuls"] = matmuls or PlainMatmuls(weights)
    return weights.packed["matmuls"]
