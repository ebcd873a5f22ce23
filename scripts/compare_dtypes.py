"""float32 against float16 weights on CPU (`--dtype float16`, `decoders.backends.fp16_cpu`) on the bundled
SmolLM2-135M, side by side in one run.

* the one-token step (ms) and T(k) = a k-token forward (all k rows of logits kept, as a verify
  keeps them) over the one-token forward, k = 1, 2, 5, 8, 11, 16, after ~100 tokens of context;
  rounds alternate the two backends (and their order), medians and the spread over rounds;
  per thread count in ``--threads`` (default 1);
* the weight bytes each backend reads per forward (what the bench's bandwidth floor uses);
* greedy 64-token outputs on one Spec-Bench prompt per category (6): float16 AR against float32
  AR (equal only up to near-ties), and float16 PLD and int4-draft speculative against float16 AR
  (equal by construction).

    python scripts/compare_dtypes.py [--threads 1,2] [--rounds 15] [--tokens 64] [--pause-file PATH]

``--pause-file PATH``: before each round, wait while PATH exists (another measurement is running).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

WIDTHS = (1, 2, 5, 8, 11, 16)
CONTEXT = 100


def load(dtype: str):
    from decoders.models.families import BUILTIN_FAMILIES
    from decoders.models.family import load_family

    return load_family(replace(BUILTIN_FAMILIES["smollm2-135m"], device="cpu", dtype=dtype))


def context_ids(family, prompts) -> torch.Tensor:
    """CONTEXT tokens of real text (the prompts' chat-formatted ids, concatenated)."""
    ids: list[int] = []
    for row in prompts:
        ids += family.encode_prompt(row["turns"][0], chat_template=True)
    return torch.tensor(ids[:CONTEXT])


def forward_ms(backend, ids: torch.Tensor, k: int) -> float:
    backend.crop(CONTEXT)
    new = ids[:k]
    start = time.perf_counter()
    backend.forward(new, k)
    elapsed = time.perf_counter() - start
    backend.crop(CONTEXT)
    return elapsed * 1e3


def wait_for(pause_file: str | None) -> None:
    if pause_file and os.path.exists(pause_file):
        print(f"  waiting: {pause_file} exists", flush=True)
        while os.path.exists(pause_file):
            time.sleep(5)


def timings(families: dict, ids: torch.Tensor, threads: int, rounds: int, pause_file: str | None) -> dict:
    """Per dtype: per-round one-token ms and T(k) ratios (each round: the two backends in
    alternating order, each width timed 3x and the median kept)."""
    torch.set_num_threads(threads)
    step = {name: [] for name in families}
    ratio = {name: {k: [] for k in WIDTHS} for name in families}
    extra = ids[CONTEXT:CONTEXT + max(WIDTHS)]
    for family in families.values():
        family.main.reset()
        family.main.forward(ids[:CONTEXT], 1)
        for k in WIDTHS:  # warm every width once
            forward_ms(family.main, extra, k)
    for r in range(rounds):
        wait_for(pause_file)
        order = list(families) if r % 2 == 0 else list(families)[::-1]
        for name in order:
            backend = families[name].main
            ms = {k: statistics.median(forward_ms(backend, extra, k) for _ in range(3)) for k in WIDTHS}
            step[name].append(ms[1])
            for k in WIDTHS:
                ratio[name][k].append(ms[k] / ms[1])
    return {"step": step, "ratio": ratio}


def spread(values: list[float], digits: int) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):.{digits}f} [{q[0]:.{digits}f}-{q[2]:.{digits}f}]"


def identity(families: dict, prompts, tokens: int) -> list[dict]:
    from decoders.core.params import DecodeParams
    from decoders.engine import Engine

    engines = {name: Engine(family) for name, family in families.items()}
    torch.set_num_threads(1)
    rows = []
    for row in prompts:
        text = row["turns"][0]
        ar = {name: engines[name].run(text, DecodeParams(method="ar", max_new_tokens=tokens)).method.ids
              for name in families}
        a, b = ar["float32"], ar["float16"]
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                     None if len(a) == len(b) else min(len(a), len(b)))
        record = {"category": row["category"], "tokens": len(b), "fp16_ar_equals_fp32_ar": first is None,
                  "first_divergence": first}
        for method in ("pld", "spec"):
            for name in ("float16", "float32"):  # spec: the int4 draft's speedup over each target
                result = engines[name].run(text, DecodeParams(method=method, max_new_tokens=tokens))
                s = result.summary
                record[f"{name}_{method}_speedup_decode"] = round(s.speedup_decode, 3) if s.speedup_decode else None
                if method == "spec":
                    record[f"{name}_spec_c_hat"] = s.extras.get("c_hat")
                if name == "float16":
                    record[f"fp16_{method}_equals_fp16_ar"] = result.method.ids == b
        rows.append(record)
        print(json.dumps(record), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1", help="comma-separated torch thread counts (default 1)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=6, help="one Spec-Bench prompt per category, this many")
    ap.add_argument("--file", default=str(Path(__file__).resolve().parents[1] / "bench" / "spec_bench_dev.jsonl"))
    ap.add_argument("--pause-file", default=None)
    ap.add_argument("--no-identity", action="store_true")
    ap.add_argument("--no-timing", action="store_true", help="only the greedy outputs")
    args = ap.parse_args()

    rows = [json.loads(line) for line in open(args.file)]
    seen, prompts = set(), []
    for row in rows:
        if row["category"] not in seen:
            seen.add(row["category"])
            prompts.append(row)
    prompts = prompts[: args.prompts]

    torch.set_num_threads(1)
    families = {"float32": load("float32"), "float16": load("float16")}
    for name, family in families.items():
        main = family.main
        print(f"{name}: {type(main).__name__}, {family.describe().dtype}, weights read per forward "
              f"{main.weight_bytes / 1e6:.1f} MB, draft {type(family.helper).__name__} "
              f"{family.helper.weight_bytes / 1e6:.1f} MB")
    ids = context_ids(families["float32"], rows)
    ids = torch.cat([ids, ids[: max(WIDTHS)]])
    print(f"load average at start: {os.getloadavg()}", flush=True)

    for threads in () if args.no_timing else (int(t) for t in args.threads.split(",")):
        result = timings(families, ids, threads, args.rounds, args.pause_file)
        print(f"\n{threads} thread(s), {args.rounds} rounds, context {CONTEXT} tokens; median [quartiles] over rounds")
        for name in families:
            print(f"  {name:8s} one-token step ms {spread(result['step'][name], 1)}")
        ratios = [b / a for a, b in zip(result["step"]["float32"], result["step"]["float16"], strict=False)]
        print(f"  float16/float32 step time (per round) {spread(ratios, 3)}")
        print("  T(k)     " + "".join(f"{'k=' + str(k):>22s}" for k in WIDTHS))
        for name in families:
            print(f"  {name:8s} " + "".join(f"{spread(result['ratio'][name][k], 2):>22s}" for k in WIDTHS))
        print(f"  load average: {os.getloadavg()}", flush=True)

    if not args.no_identity:
        print(f"\ngreedy {args.tokens}-token outputs, 1 thread")
        records = identity(families, prompts, args.tokens)
        n = len(records)
        print(f"fp16 AR == fp32 AR: {sum(r['fp16_ar_equals_fp32_ar'] for r in records)}/{n}; "
              f"fp16 PLD == fp16 AR: {sum(r['fp16_pld_equals_fp16_ar'] for r in records)}/{n}; "
              f"fp16 spec (int4 draft) == fp16 AR: {sum(r['fp16_spec_equals_fp16_ar'] for r in records)}/{n}")
        for method in ("pld", "spec"):
            print(f"{method} decode speedup over its own AR, median over prompts: " + ", ".join(
                f"{name} {statistics.median(r[f'{name}_{method}_speedup_decode'] or 0 for r in records):.2f}x"
                for name in ("float32", "float16")))
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
