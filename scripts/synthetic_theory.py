"""Synthetic acceptance against Theorem 3.8 on the bundled model, in one run: for acceptance
0.5 / 0.7 / 0.9 and γ 1..8 (batch 1), the decode speedup the synthetic draft measured (each run
beside its interleaved autoregressive baseline) and the cost-aware prediction at the same α, γ,
c and the measured verify cost T(γ+1), side by side; the CPU's vector features and the load
average before and after.

    taskset -c 1 .venv/bin/python scripts/synthetic_theory.py [--prompts 2] [--tokens 64] [--cost 0.05]
        [--alphas 0.5,0.7,0.9] [--gammas 1-8] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=2, help="Spec-Bench dev prompts (1..12)")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--cost", type=float, default=0.05, help="the draft's cost c per token (0..4)")
    parser.add_argument("--alphas", default="0.5,0.7,0.9")
    parser.add_argument("--gammas", default="1-8")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="write the rows and the machine to this file")
    args = parser.parse_args()
    if not 1 <= args.prompts <= 12 or not 1 <= args.tokens <= 1024 or not 0 <= args.cost <= 4:
        parser.error("--prompts 1..12, --tokens 1..1024, --cost 0..4")
    low, _, high = args.gammas.partition("-")
    gammas = range(int(low), int(high or low) + 1)
    alphas = [float(a) for a in args.alphas.split(",")]

    import torch

    from decoders.bench.machine import load_average
    from decoders.bench.prompts import load_prompts
    from decoders.bench.synthetic import measure_grid, table
    from decoders.engine import Engine
    from decoders.methods.synthetic import enable
    from decoders.models.families import BUILTIN_FAMILIES
    from decoders.models.family import load_family
    from decoders.models.machine import cpu_features

    torch.set_num_threads(args.threads)
    enable()
    model, flags = cpu_features()
    before = load_average()
    family = load_family(replace(BUILTIN_FAMILIES["smollm2-135m"], device="cpu", dtype="float32", draft=None))
    prompts = [p.text for p in load_prompts(ROOT / "bench" / "spec_bench_dev.jsonl")[: args.prompts]]
    print(f"cpu {model}; vector {flags}; {os.cpu_count()} cpus, torch threads {args.threads}; "
          f"load average {before}; {family.label}, {args.tokens} tokens, {len(prompts)} prompts, c={args.cost:g}",
          flush=True)
    engine = Engine(family)
    rows = measure_grid(engine, prompts, alphas, gammas, cost=args.cost, tokens=args.tokens,
                        progress=lambda line: print(line, flush=True))
    after = load_average()
    print()
    print(table(rows))
    print(f"load average before {before}, after {after}")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": model, "vector": flags, "threads": args.threads,
                                               "load_before": before, "load_after": after, "tokens": args.tokens,
                                               "prompts": len(prompts), "rows": [asdict(r) for r in rows]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
