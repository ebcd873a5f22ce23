"""Would an int8 (or fp16) self-draft on fbgemm's kernels beat the int4 one on this CPU?

For each draft option, on the bundled model in float32, one torch thread: c, the draft's
one-token step over the target's (interleaved rounds, median and range), and the draft's
teacher-forced top-1 agreement and mean sum(min(p, q)) with the target, one token at a time
along the target's own greedy continuation of a few Spec-Bench prompts (the draft drafts one
token at a time, and fbgemm quantizes each call's activations as a whole, so a many-token
forward would not measure the same thing).

The int8 and fp16 matmuls live here, not in `decoders`: they did not pay (docs/results/
2026-12-01-int8-fbgemm-drafts.md). int8: weights symmetric per output channel, ``torch.ops.quantized.linear_prepack``
on a qint8 tensor made by ``torch._make_per_channel_quantized_tensor`` (torch warns that
quantized dtypes are deprecated; the warning is silenced around that one call), then
``torch.ops.quantized.linear_dynamic(x, packed, reduce_range=True)`` (7-bit activations per
call; ``reduce_range=False`` saturates AVX2's 16-bit sums: agreement 0.02). fp16:
``torch.ops.quantized.linear_prepack_fp16`` / ``linear_dynamic_fp16`` (no warning).

    python scripts/measure_int8_draft.py [--prompts 4] [--tokens 48] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from dataclasses import replace


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--file", default="bench/spec_bench_dev.jsonl")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    import decoders.backends.quantized as Q
    from decoders.models.drafts import Int4
    from decoders.models.families import BUILTIN_FAMILIES
    from decoders.models.family import load_family

    class Int8Linear:
        def __init__(self, weight, group=None):
            w = weight.detach().float()
            scale = (w.abs().amax(1) / 127).clamp(min=1e-8)
            q = (w / scale[:, None]).round_().clamp_(-127, 127).to(torch.int8)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r".*quantized tensor creation functions.*")
                zero = torch.zeros(len(q), dtype=torch.long)
                qw = torch._make_per_channel_quantized_tensor(q, scale.double(), zero, 0)
            self.packed = torch.ops.quantized.linear_prepack(qw, None)
            self.nbytes = q.numel() + 12 * len(q)

        def __call__(self, x):
            return torch.ops.quantized.linear_dynamic(x.float(), self.packed, True)

    class Fp16Linear:
        def __init__(self, weight, group=None):
            self.packed = torch.ops.quantized.linear_prepack_fp16(weight.detach().float().contiguous(), None)
            self.nbytes = weight.numel() * 2

        def __call__(self, x):
            return torch.ops.quantized.linear_dynamic_fp16(x.float(), self.packed)

    class FloatActivations(Q.QuantizedLlamaBackend):
        """fbgemm's dynamic kernels take float32 activations: no bfloat16 cast after the norms."""

        def _prenorm(self, x, weight):
            if weight is None:
                return super()._prenorm(x, weight)
            return F.rms_norm(x, weight.shape, weight, self.weights.eps), 1.0

    family = load_family(replace(BUILTIN_FAMILIES["smollm2-135m"], device="cpu", dtype="float32", draft=Int4()))
    target, model, tok = family.main, family.main_model, family.tokenizer

    def draft(layers, head):
        """layers: Int4Linear, Int8Linear or Fp16Linear; head: None (the target's, shared) or a class."""
        original = Q.Int4Linear
        Q.Int4Linear = layers
        try:
            with torch.no_grad():
                _, mms = Q._quantized_layers(model, Q.DEFAULT_GROUP, target.device)
                head_mm = (Q._DenseHead(target.weights.head, torch.float32) if head is None
                           else head(target.weights.head.t().contiguous(), Q.DEFAULT_GROUP))
        finally:
            Q.Int4Linear = original
        cls = Q.QuantizedLlamaBackend if layers is Q.Int4Linear else FloatActivations
        # the int4 draft's weights: the shared embedding and final norm, shells with the unfolded norms
        return cls(family.helper.weights, Q._QuantizedMatmuls(mms, head_mm, target.dtype),
                   max_positions=target.max_positions, head="model" if head is None else "int4")

    options = {
        "int4 g32 + target's float32 head (default)": lambda: family.helper,
        "int4 g32 + int8 head (fbgemm dynamic)": lambda: draft(Q.Int4Linear, Int8Linear),
        "int8 (fbgemm dynamic) + target's float32 head": lambda: draft(Int8Linear, None),
        "int8 (fbgemm dynamic) + int8 head": lambda: draft(Int8Linear, Int8Linear),
        "int8 (fbgemm dynamic) + int4 head": lambda: draft(Int8Linear, Q.Int4Linear),
        "fp16 (fbgemm) + fp16 head": lambda: draft(Fp16Linear, Fp16Linear),
    }
    drafts = {}
    for name, build in options.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            drafts[name] = build()
        if caught:
            print(f"{name}: warnings while building: {[str(w.message)[:100] for w in caught]}")

    rows = [json.loads(line) for line in open(args.file)]
    seen, prompts = set(), []
    for row in rows:  # one prompt per task group
        if row["category"] not in seen:
            seen.add(row["category"])
            prompts.append(tok.encode(tok.apply_chat_template([{"role": "user", "content": row["turns"][0]}],
                                                               tokenize=False, add_generation_prompt=True)))
    prompts = prompts[: args.prompts]

    def trace(backend, ids, continuation):
        backend.reset()
        logits = [backend.forward(torch.tensor(ids), 1)[-1]]
        logits += [backend.forward(torch.tensor([t]), 1)[-1] for t in continuation[:-1]]
        backend.reset()
        return torch.stack(logits)

    references = []
    for ids in prompts:
        target.reset()
        logits, continuation = target.forward(torch.tensor(ids), 1)[-1], []
        for _ in range(args.tokens):
            continuation.append(int(logits.argmax()))
            logits = target.forward(torch.tensor([continuation[-1]]), 1)[-1]
        references.append((ids, continuation, trace(target, ids, continuation)))

    def quality(backend):
        agree = overlap = 0.0
        for ids, continuation, reference in references:
            logits = trace(backend, ids, continuation)
            agree += float((logits.argmax(-1) == reference.argmax(-1)).sum())
            overlap += float(torch.minimum(logits.softmax(-1), reference.softmax(-1)).sum())
        n = sum(len(c) for _, c, _ in references)
        return agree / n, overlap / n

    context = torch.tensor(prompts[0])

    def step_ms(backend, reps=20):
        backend.reset()
        backend.forward(context, 1)
        token, times = torch.tensor([42]), []
        for i in range(reps + 1):
            start = time.perf_counter()
            backend.forward(token, 1)
            if i:
                times.append(time.perf_counter() - start)
            backend.crop(backend.cached_length - 1)
        backend.reset()
        return statistics.median(times) * 1e3

    scores = {name: quality(d) for name, d in drafts.items()}
    ratios, target_ms = {name: [] for name in drafts}, []
    for _ in range(args.rounds):
        for name, d in drafts.items():
            t = step_ms(target)
            target_ms.append(t)
            ratios[name].append(step_ms(d) / t)
    print(f"target one-token step {statistics.median(target_ms):.1f} ms (median); {len(prompts)} prompts x "
          f"{args.tokens} teacher-forced tokens; load average {os.getloadavg()[0]:.1f}")
    print("| draft | top-1 agreement | sum(min(p, q)) | c (median, range) | draft's own weights |")
    print("| --- | --- | --- | --- | --- |")
    for name, d in drafts.items():
        own = sum(m.nbytes for layer in d._matmuls.layers for m in (layer[0], layer[2], layer[3], layer[4]))
        own += d._matmuls.head_matmul.nbytes if d.head != "model" else 0
        r = ratios[name]
        print(f"| {name} | {scores[name][0]:.3f} | {scores[name][1]:.3f} | {statistics.median(r):.2f} "
              f"({min(r):.2f}-{max(r):.2f}) | {own / 1e6:.0f} MB |")


if __name__ == "__main__":
    main()
