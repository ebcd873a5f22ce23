"""Float16 weights on CPU: `--dtype float16` there means a float32 model whose matrices run as
float16 through fbgemm's kernels.

A one-token step on CPU streams every weight from memory once, so it costs about the weight
bytes over the memory bandwidth; fbgemm's ``linear_dynamic_fp16`` reads float16 weights (half
the bytes) and computes in float32, and its small-batch GEMM keeps a verify of a few tokens
close to a one-token step. Measured on 2 AVX2 cores, one thread, SmolLM2-135M: see
docs/results/2026-12-01-float16-weights.md and scripts/compare_dtypes.py.

* The matrices are exactly the ones the float32 `decoders.backends.llama_fast.LlamaBackend` uses (fused
  q/k/v and gate/up, q/k rows in RoPE pairs, RMSNorm weights folded in, the LM head with the
  final norm folded in), each rounded once to float16 by ``quantized.linear_prepack_fp16``; the
  float32 copies are dropped once packed.
* Activations, the embedding, norms, RoPE, attention and the KV cache stay float32, so a
  float16 backend's cache has the float32 layout (the int4 self-draft and early exits adopt it).
* Every forward, one token or many, runs the same kernels: greedy output of every method equals
  float16 autoregressive decoding (not necessarily float32's: near-ties may round the other way).

The transformers module behind the backend stays float32 (the int4 self-draft is quantized from
it, the bench's reference runs it): that memory stays, beside the float16 copy. fbgemm pads each
packed matrix's input dimension to a multiple of 512 rows, so a 576-wide input takes 1024 rows in
memory: on the bundled model the packed copy holds ~437 MB though a forward reads the 269 MB of
real weights (`weight_bytes`). Bundled model, whole process after load: float32 2.09 GB (its
matrices transposed and oneDNN-packed beside transformers'), float16 1.38 GB (2.06 GB at the
peak, while the float32 copies are packed).
"""

from __future__ import annotations

import torch

from decoders.backends.kv_cache import CACHE_CHUNK, KVCache
from decoders.backends.llama_fast import LlamaBackend, unsupported_reason
from decoders.backends.llama_weights import Layer, Weights, prepare
from decoders.core.errors import DecodeError

#: How `Family.describe` shows the dtype of a float16 family on CPU.
DESCRIPTION = "float16 weights, float32 activations"
USE_FLOAT32 = "use --dtype float32"


def fbgemm_reason() -> str | None:
    """Why this torch cannot run float16 weights on CPU (fbgemm's fp16 ops), or None when it can."""
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        return "this torch build has no fbgemm quantized engine (float16 weights on CPU run through its kernels)"
    try:
        _probe()
    except (RuntimeError, AttributeError, NotImplementedError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        return f"fbgemm's float16 linear kernel does not run here ({why})"
    return None


def _probe() -> None:
    """One tiny float16-weight product: raises where the kernels are missing."""
    packed = torch.ops.quantized.linear_prepack_fp16(torch.ones(16, 16), None)
    torch.ops.quantized.linear_dynamic_fp16(torch.ones(1, 16), packed)


def refuse(why: str) -> DecodeError:
    return DecodeError(f"float16 on CPU needs {why}; {USE_FLOAT32}.")


def load_dtype_for(device: torch.device, dtype: torch.dtype, fast: bool, device_map) -> torch.dtype:
    """The dtype to load a family's models in: ``dtype`` itself, except float16 on CPU (float16
    weights on a float32 model), which is float32, or DecodeError when it cannot run."""
    if device.type != "cpu" or dtype != torch.float16:
        return dtype
    check_family(fast, device_map)
    return torch.float32


def check_family(fast: bool, device_map) -> None:
    """Before loading: DecodeError when float16 weights on CPU cannot run for this family."""
    if not fast:
        raise refuse("the fast Llama backend (float16 weights through fbgemm), "
                     "and the transformers backend was asked for")
    if device_map is not None:
        raise refuse("the whole model in the fast backend on the CPU, not spread by a device map")
    reason = fbgemm_reason()
    if reason is not None:
        raise refuse(f"fbgemm's float16 kernels, and {reason}")


def backend_for(model, max_positions: int | None = None) -> Fp16LlamaBackend:
    """The float16-weight backend of the float32 transformers ``model``; DecodeError when the fast
    backend cannot run it (the transformers fallback has no float16-weight path)."""
    reason = unsupported_reason(model)
    if reason is not None:
        raise refuse(f"a Llama-shaped model for the fast backend, and this one is not ({reason})")
    if next(model.parameters()).dtype != torch.float32:
        raise refuse("the model loaded in float32")
    return Fp16LlamaBackend.from_hf(model, max_positions=max_positions)


def _return_freed_memory() -> None:
    """Hand the freed float32 copies back to the OS (glibc keeps freed heap memory otherwise: on
    the bundled model the process stays ~460 MB larger without this)."""
    import ctypes
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (musl): nothing to do
            pass


class _Fp16Linear:
    """``x @ W.T + b`` for an ``[out, in]`` float32 weight rounded to float16, float32 in and out."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        self.packed = torch.ops.quantized.linear_prepack_fp16(weight.contiguous(), bias)
        self.shape = tuple(weight.shape)
        self.nbytes = weight.numel() * 2 + (0 if bias is None else bias.numel() * bias.element_size())

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.quantized.linear_dynamic_fp16(x, self.packed)

    def dense(self) -> torch.Tensor:
        """The float16-rounded weight as float32 ``[out, in]``."""
        return torch.ops.quantized.linear_unpack_fp16(self.packed)[0]


def _bias(b: torch.Tensor) -> torch.Tensor | None:
    return b if bool(b.any()) else None  # zeros (Llama) add nothing: no bias pass at all


class Fp16Matmuls:
    """The projections of `LlamaBackend._forward` on float16 weights (see `PlainMatmuls`).

    Inputs arrive normalised in float32 (``alpha`` is always 1: the backend turns the scalar
    one-token norm off); products come back float32, residual adds in place.
    """

    def __init__(self, weights: Weights):
        self.layers = [
            (_Fp16Linear(layer.wqkv.t(), _bias(layer.bqkv)), _Fp16Linear(layer.wo.t()),
             _Fp16Linear(layer.wgate_up.t(), _bias(layer.bgate_up)), _Fp16Linear(layer.wdown.t()))
            for layer in weights.layers
        ]
        self.head_matmul = _Fp16Linear(weights.head.t())

    def nbytes(self, n_layers: int | None = None) -> int:
        """Bytes of the first ``n_layers`` layers' matrices (all when None) and the LM head."""
        return sum(m.nbytes for layer in self.layers[:n_layers] for m in layer) + self.head_matmul.nbytes

    def qkv(self, i: int, h: torch.Tensor, alpha: float) -> torch.Tensor:
        return self.layers[i][0](h)

    def out(self, i: int, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return x.add_(self.layers[i][1](a))

    def gate_up(self, i: int, h: torch.Tensor, alpha: float) -> torch.Tensor:
        return self.layers[i][2](h)

    def down(self, i: int, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return x.add_(self.layers[i][3](a))

    def head(self, x: torch.Tensor) -> torch.Tensor:
        return self.head_matmul(x)


def _shell(w: Weights) -> Weights:
    """``w`` without its float32 matrices: meta tensors of the same shapes stand in (sizes still
    readable, any computation on them fails), the small vectors and the embedding stay."""
    def meta(t: torch.Tensor) -> torch.Tensor:
        return torch.empty(t.shape, dtype=t.dtype, device="meta")

    layers = tuple(Layer(attn_norm=layer.attn_norm, wqkv=meta(layer.wqkv), bqkv=layer.bqkv, wo=meta(layer.wo),
                          mlp_norm=layer.mlp_norm, wgate_up=meta(layer.wgate_up), bgate_up=layer.bgate_up,
                          wdown=meta(layer.wdown)) for layer in w.layers)
    return Weights(embed=w.embed, layers=layers, norm=w.norm, head=meta(w.head), inv_freq=w.inv_freq,
                    rope_scale=w.rope_scale, heads=w.heads, kv_heads=w.kv_heads, head_dim=w.head_dim, eps=w.eps,
                    max_positions=w.max_positions, final_norm=w.final_norm)


class Fp16LlamaBackend(LlamaBackend):
    """A `LlamaBackend` (CPU, float32 activations) whose matrices and LM head are float16 weights
    run through fbgemm. Every forward uses them: no packed multi-token copy, no CUDA graph."""

    def __init__(self, weights: Weights, matmuls: Fp16Matmuls, n_layers: int | None = None,
                 max_positions: int | None = None):
        w = weights
        self._set_shape(w, n_layers, max_positions)
        self.packed_multi_token = False
        self.step_mode, self.step = "off", None
        # LlamaBackend._plain is inferred as PlainMatmuls (llama_fast.py); any object with its methods serves
        self._matmuls = self._plain = matmuls  # type: ignore[assignment]
        self._scalar_norm = False  # fbgemm has no alpha: inputs arrive normalised
        self.weight_bytes = matmuls.nbytes(self.n_layers)
        self.cache = KVCache(self.n_layers, w.kv_heads, w.head_dim, self.max_positions, self.dtype, self.device,
                             w.inv_freq, w.rope_scale, chunk=CACHE_CHUNK)

    @classmethod
    def from_hf(cls, model, max_positions: int | None = None, packed_multi_token: bool = True,
                step_mode: str = "off") -> Fp16LlamaBackend:
        """Build from a float32 transformers Llama-shaped model on CPU (``packed_multi_token`` and
        ``step_mode`` are accepted for `LlamaBackend.from_hf`'s signature and do not apply)."""
        reason = unsupported_reason(model)
        if reason is not None:
            raise TypeError(f"Fp16LlamaBackend cannot run {type(model).__name__}: {reason}")
        with torch.no_grad():
            weights = prepare(model, contiguous=False)  # [out, in] memory: the packer copies nothing
            if not weights.folded or weights.embed.device.type != "cpu":
                raise TypeError("Fp16LlamaBackend runs float32 models on the CPU")
            matmuls = Fp16Matmuls(weights)
            shell = _shell(weights)
        del weights
        _return_freed_memory()
        return cls(shell, matmuls, max_positions=max_positions)

    def early_exit(self, layers: int) -> Fp16LlamaBackend:
        """The first ``layers`` layers + final norm + head, on the same packed weights."""
        exit_ = Fp16LlamaBackend(self.weights, self._matmuls, layers, self.max_positions)
        exit_.draft_of = self.draft_of or self
        return exit_

    def dense_head(self) -> torch.Tensor:
        """The LM head as the float32 backend holds it (``[hidden, vocab]``, final norm folded
        in), rounded to float16: what a draft built from this backend reads for its own head."""
        return self._matmuls.head_matmul.dense().t()

    @property
    def shared_head(self):
        """The packed LM head, for a draft that shares it (`QuantizedLlamaBackend.from_target`)."""
        return self._matmuls.head_matmul
