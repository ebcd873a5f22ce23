"""Measurements behind scripts/profile_backend.py: the read-bandwidth floor, forward times, and
a forward of `LlamaBackend` timed part by part.

`timed_forward` runs the same code path as ``LlamaBackend._forward`` (the backend's own
matmul objects, ``_prenorm``, the cache's ``rotate`` and ``rope_rows``), with a clock read
between the parts; `check_timed_forward` asserts that its logits equal the backend's
bit for bit, so the replica cannot drift from the real forward unnoticed.
"""

from __future__ import annotations

import os
import statistics
import time
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from decoders.backends import llama_fast, llama_weights

#: Part names of the breakdown, in print order. ``other`` is the forward's wall time less the parts.
PARTS = ("qkv", "o", "gate_up", "down", "attn", "norms", "rotary", "act", "head", "other")


def idle_fraction(seconds: float = 0.3) -> float:
    """Share of all CPUs idle over ``seconds`` (Linux /proc/stat; 1.0 where unavailable)."""
    def read():
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        return values[3] + values[4], sum(values)

    try:
        idle0, total0 = read()
        time.sleep(seconds)
        idle1, total1 = read()
    except OSError:
        return 1.0
    return (idle1 - idle0) / max(1, total1 - total0)


def wait_for_idle(threshold: float, limit: float = 20.0) -> None:
    """On a shared machine, start a measurement only once other processes leave the CPUs alone
    (at most ``limit`` seconds of waiting: on a machine that never idles, the run still ends)."""
    deadline = time.monotonic() + limit
    while threshold > 0 and time.monotonic() < deadline and idle_fraction() < threshold:
        pass


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "unknown"


@contextmanager
def threads(count: int):
    """``torch.set_num_threads(count)`` for the block (0: leave as is)."""
    before = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class Floor:
    """The time to read ``nbytes`` from memory: a sum over a touched float32 buffer of that size."""

    def __init__(self, nbytes: int):
        self.data = torch.ones(max(nbytes // 4, 1 << 20), dtype=torch.float32)  # written: pages are real
        self.nbytes = self.data.numel() * 4

    def read_ms(self, repeats: int = 5) -> float:
        """Best of ``repeats`` reads, in ms (best: the floor is what the hardware allows)."""
        self.data.sum()
        return min(timed(self.data.sum) for _ in range(repeats)) * 1e3


def forward_ms(backend, prompt: torch.Tensor, n: int, reps: int = 3) -> float:
    """Median ms of a forward of ``n`` tokens, all kept, after ``prompt`` (cropped back each time).

    The caller prefills ``prompt`` once (`prefill`); every forward here starts at its end."""
    ids = prompt[-n:].clone() if n <= len(prompt) else prompt[:1].repeat(n)
    times = []
    for _ in range(reps):
        backend.crop(len(prompt))
        times.append(timed(lambda: backend.forward(ids, n)))
    backend.crop(len(prompt))
    return statistics.median(times) * 1e3


def prefill(backend, prompt: torch.Tensor) -> None:
    backend.reset()
    backend.forward(prompt, 1)


def timed_forward(backend, ids: torch.Tensor, mm, clock: dict[str, float]) -> torch.Tensor:
    """``LlamaBackend.forward(ids, keep=len(ids))`` after the cached positions (causal, no tree
    mask), on the matmul object ``mm`` (`llama_weights.PlainMatmuls` or `PackedMatmuls`), adding
    the seconds of each part to ``clock``. Leaves the cache as the forward would."""
    now = time.perf_counter
    t_start = now()
    w, cache = backend.weights, backend.cache
    n = int(ids.shape[0])
    start = cache.length
    end = start + n
    if end > cache.capacity:
        cache.reserve(end)
    heads, kvh, hd = w.heads, w.kv_heads, w.head_dim
    rope_width = (heads + kvh) * hd
    scale = hd**-0.5
    parts = dict.fromkeys(PARTS, 0.0)
    plain = isinstance(mm, llama_weights.PlainMatmuls)

    def prenorm(x, weight):
        if weight is None and not plain:  # packed matmuls take normalised rows, never ``alpha``
            return F.rms_norm(x, (x.shape[-1],), None, w.eps), 1.0
        return backend._prenorm(x, weight)
    with torch.inference_mode():
        rope = cache.rope_rows(start, end)
        mask = None
        causal = n > 1 and start == 0
        if n > 1 and not causal:
            mask = torch.ones(n, end, dtype=torch.bool, device=backend.device)
            mask.tril_(start)
        x = F.embedding(ids, w.embed)
        for i, (layer, kv) in enumerate(zip(backend._layers, cache.layers, strict=False)):
            t0 = now()
            h, alpha = prenorm(x, layer.attn_norm)
            t1 = now()
            qkv = mm.qkv(i, h, alpha)
            t2 = now()
            cache.rotate(qkv[:, :rope_width].view(n, heads + kvh, hd), rope)
            t3 = now()
            attn = llama_fast.attend(qkv, kv, start, end, heads, kvh, hd, scale, mask, causal)
            t4 = now()
            x = mm.out(i, x, attn)
            t5 = now()
            h, alpha = prenorm(x, layer.mlp_norm)
            t6 = now()
            gate, up = mm.gate_up(i, h, alpha).chunk(2, dim=-1)
            t7 = now()
            act = F.silu(gate).mul_(up)
            t8 = now()
            x = mm.down(i, x, act)
            t9 = now()
            parts["norms"] += (t1 - t0) + (t6 - t5)
            parts["qkv"] += t2 - t1
            parts["rotary"] += t3 - t2
            parts["attn"] += t4 - t3
            parts["o"] += t5 - t4
            parts["gate_up"] += t7 - t6
            parts["act"] += t8 - t7
            parts["down"] += t9 - t8
        t0 = now()
        if w.norm is None:
            h = F.rms_norm(x, (x.shape[-1],), None, w.eps)
        else:
            h, _ = backend._prenorm(x, w.norm)
        t1 = now()
        logits = mm.head(h).float()
        t2 = now()
        parts["norms"] += t1 - t0
        parts["head"] += t2 - t1
    cache.length = end
    parts["other"] = (t2 - t_start) - sum(parts.values())
    for key, seconds in parts.items():
        clock[key] = clock.get(key, 0.0) + seconds
    clock["total"] = clock.get("total", 0.0) + (t2 - t_start)
    return logits


def layouts(backend) -> dict[str, object]:
    """The matmul objects a breakdown compares: plain addmm and (where available) oneDNN-packed."""
    # float16 weights (`decoders.backends.fp16_cpu`): their one layout, no packed copy
    found = {"plain": backend._plain}
    plain = isinstance(backend._plain, llama_weights.PlainMatmuls)
    packed = llama_weights.packed_matmuls(backend.weights) if plain else None
    if isinstance(packed, llama_weights.PackedMatmuls):
        found["packed"] = packed
    return {**found, **_EXTRA}


def chosen_layout(backend, n: int) -> str:
    """The layout ``backend.forward`` uses for ``n`` tokens."""
    return "packed" if backend.packed_multi_token and 1 < n <= llama_fast.PACKED_MAX_TOKENS else "plain"


def check_timed_forward(backend, prompt: torch.Tensor, sizes) -> None:
    """Assert that `timed_forward` gives the backend's own logits, bit for bit, at each size."""
    for n in sizes:
        ids = prompt[-n:].clone()
        prefill(backend, prompt)
        backend.crop(len(prompt))
        want = backend.forward(ids, n)
        backend.crop(len(prompt))
        got = timed_forward(backend, ids, layouts(backend)[chosen_layout(backend, n)], {})
        backend.crop(len(prompt))
        if not torch.equal(want, got):
            raise AssertionError(f"timed_forward differs from LlamaBackend.forward at {n} tokens")


def breakdown_ms(backend, prompt: torch.Tensor, n: int, layout: str, reps: int = 2) -> dict[str, float]:
    """Per-part ms of an ``n``-token forward on ``layout``, the median forward of ``reps`` kept
    (one untimed forward first). The cache must hold ``prompt``."""
    mm = layouts(backend)[layout]
    ids = prompt[-n:].clone() if n <= len(prompt) else prompt[:1].repeat(n)
    runs = []
    for rep in range(reps + 1):
        backend.crop(len(prompt))
        clock: dict[str, float] = {}
        timed_forward(backend, ids, mm, clock)
        if rep:
            runs.append(clock)
    backend.crop(len(prompt))
    best = sorted(runs, key=lambda c: c["total"])[len(runs) // 2]
    return {key: seconds * 1e3 for key, seconds in best.items()}


# -- candidate layouts, measured beside the backend's own (``--variants``) ----------------------

class _FusedAdd(llama_weights.PackedMatmuls):
    """Packed weights with the residual add fused into the o and down projections (oneDNN's
    binary post-op: the same sum, one op less per projection)."""

    def out(self, i, x, a):
        return torch.ops.mkldnn._linear_pointwise.binary(a, x, self.layers[i][2], None, "add")

    def down(self, i, x, a):
        return torch.ops.mkldnn._linear_pointwise.binary(a, x, self.layers[i][4], None, "add")


def _hinted(hint):
    return type(f"_Hint{hint}", (llama_weights.PackedMatmuls,), {"BATCH_HINT": hint})


#: name -> class; a variant is packed from the backend's weights when asked for.
VARIANTS = {"fused_add": _FusedAdd, "hint5": _hinted(5), "hint8": _hinted(8), "hint_none": _hinted(None)}
_EXTRA: dict[str, object] = {}


def add_variants(backend, names) -> None:
    """Pack the named `VARIANTS` so that `layouts` offers them too (one weight copy each)."""
    with torch.inference_mode():
        for name in names:
            _EXTRA[name] = VARIANTS[name](backend.weights)
