"""The one-token step of `decoders.backends.llama_fast.LlamaBackend` with static shapes, for CUDA graphs.

A decode step on a GPU is launch-bound: a few hundred small kernels, each costing more to
launch from Python than to run. Captured once in a CUDA graph, the whole step is one replay.
A graph needs every shape and address fixed, so this step (as gpt-fast's) differs from the
regular one in three ways:

* the token id and its position live in fixed one-element device buffers, filled before each
  replay (``copy_`` and ``fill_``: no host sync);
* the new key/value row is written with ``index_copy_`` at the position tensor, and attention
  reads the whole cache capacity under a mask ``slot <= position`` instead of a slice that grows;
* the graph is captured again whenever the cache grows (new capacity, new tensors), which
  happens once per `decoders.backends.kv_cache.CACHE_CHUNK` positions at most.

Modes: "graph" captures and replays (CUDA only); "eager" runs the same static step without a
graph, so that CPU tests check its arithmetic against the regular step. A capture that fails
turns the step off for the backend with a warning, and forwards go the regular way.

Free cache slots are zeroed once per capacity: masked slots still enter attention as
``0 * value``, and uninitialised memory may hold NaN.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from decoders.backends.llama_fast import LlamaBackend

MODES = ("off", "eager", "graph")
#: What `--cuda-graph` asks for; "auto" is "graph" on CUDA and "off" elsewhere.
CHOICES = ("auto", "on", "off")


def mode_for(choice: str, device: torch.device) -> str:
    """The step mode for a `--cuda-graph` choice on ``device`` (graphs exist on CUDA only)."""
    if choice not in CHOICES and choice not in MODES:
        raise ValueError(f"cuda graph choice must be one of {CHOICES}, got {choice!r}")
    if choice in MODES:
        return choice
    return "graph" if device.type == "cuda" and choice in ("auto", "on") else "off"


class StaticStep:
    """One-token forwards of ``backend`` at static shapes, replayed from a CUDA graph ("graph")
    or run directly ("eager")."""

    def __init__(self, backend: LlamaBackend, mode: str = "graph"):
        if mode not in ("eager", "graph"):
            raise ValueError(f"mode must be eager or graph, got {mode!r}")
        self.backend = backend
        self.mode = mode
        device = backend.device
        self.ids = torch.zeros(1, dtype=torch.long, device=device)
        self.pos = torch.zeros(1, dtype=torch.long, device=device)
        self._capacity = 0
        self._slots: torch.Tensor | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._out: torch.Tensor | None = None
        self.captures = 0

    def __call__(self, ids: torch.Tensor, start: int) -> torch.Tensor:
        """Float32 logits ``[1, vocab]`` of the token ``ids`` (1 element, on the device) at
        position ``start``; its key/value row lands in cache slot ``start``."""
        cache = self.backend.cache
        if cache.capacity != self._capacity:
            self._prepare(cache)
        self.ids.copy_(ids.reshape(1), non_blocking=True)
        self.pos.fill_(start)
        if self.mode == "eager":
            return self._compute()
        if self._graph is None:
            self._capture()
        graph, out = self._graph, self._out
        assert graph is not None and out is not None  # _capture sets both or raises
        graph.replay()
        return out.clone()  # the graph's output buffer is overwritten by the next replay

    # -- internals ---------------------------------------------------------------------------
    def _prepare(self, cache) -> None:
        """A new capacity: zero the free slots, rebuild the slot index, drop the old graph."""
        with torch.inference_mode():
            for kv in cache.layers:
                kv[:, :, cache.length:].zero_()
            self._slots = torch.arange(cache.capacity, device=self.backend.device)
        self._capacity = cache.capacity
        self._graph = None
        self._out = None

    def _capture(self) -> None:
        """Warm up on a side stream (the real inputs: rewriting slot ``start`` is idempotent), then
        capture. A failure turns the static step off for this backend."""
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self._compute()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._out = self._compute()
            self._graph = graph
            self.captures += 1
        except Exception as err:
            warnings.warn(f"CUDA graph capture failed ({type(err).__name__}: {err}); "
                          "one-token steps run without a graph", RuntimeWarning, stacklevel=2)
            self.backend.step = None
            self._graph = None
            raise _Fallback() from err

    def _norm(self, x: torch.Tensor, weight: torch.Tensor | None) -> tuple[torch.Tensor, float]:
        """RMSNorm as the regular step computes it, minus the CPU scalar shortcut (a host read)."""
        if weight is None:
            return F.rms_norm(x, (x.shape[-1],), None, self.backend.weights.eps), 1.0
        return self.backend._prenorm(x, weight)

    def _compute(self) -> torch.Tensor:
        backend = self.backend
        w, cache, mm = backend.weights, backend.cache, backend._plain
        heads, kvh, hd = w.heads, w.kv_heads, w.head_dim
        q_width = heads * hd
        rope_width = q_width + kvh * hd
        scale = hd**-0.5
        group = heads // kvh
        pos = self.pos
        table, slots = cache.rope, self._slots
        assert table is not None and slots is not None  # built by reserve() and _prepare()
        rope = table.index_select(0, pos)
        visible = (slots <= pos).view(1, 1, 1, -1)  # slot j holds a position <= pos
        x = F.embedding(self.ids, w.embed)
        for i, (layer, kv) in enumerate(zip(backend._layers, cache.layers, strict=False)):
            h, alpha = self._norm(x, layer.attn_norm)
            qkv = mm.qkv(i, h, alpha)
            cache.rotate(qkv[:, :rope_width].view(1, heads + kvh, hd), rope)
            kv.index_copy_(2, pos, qkv[:, q_width:].view(1, 2, kvh, hd).permute(1, 2, 0, 3))
            q = qkv[:, :q_width].view(1, kvh, group, hd)
            attn = F.scaled_dot_product_attention(q, kv[None, 0], kv[None, 1], attn_mask=visible, scale=scale)
            x = mm.out(i, x, attn.reshape(1, q_width))
            h, alpha = self._norm(x, layer.mlp_norm)
            gate, up = mm.gate_up(i, h, alpha).chunk(2, dim=-1)
            x = mm.down(i, x, F.silu(gate).mul_(up))
        h = self._norm(x, None)[0] if w.norm is None else backend._prenorm(x, w.norm)[0]
        return mm.head(h).float()


class _Fallback(Exception):
    """The graph could not be captured: the caller runs the regular step."""
