"""Greedy speculative decoding with the int4 self-draft against autoregressive on the bundled model:
per gamma, autoregressive and speculative back to back (the baseline re-measured each time), on a
few Spec-Bench prompts, one torch thread. Prints one JSON line per run and a table per gamma.

    python scripts/measure_int4_draft.py [--prompts 4] [--gammas 2..6] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import replace


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--gammas", default="2..6")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--file", default="bench/spec_bench_dev.jsonl")
    ap.add_argument("--head", default="model", help="the draft's LM head: model (shared), bfloat16 or int4")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from decoders.core.params import DecodeParams
    from decoders.engine import Engine
    from decoders.models.drafts import Int4
    from decoders.models.families import BUILTIN_FAMILIES
    from decoders.models.family import load_family

    lo, hi = (int(x) for x in args.gammas.split(".."))
    family = load_family(replace(BUILTIN_FAMILIES["smollm2-135m"], device="cpu", dtype="float32", draft=Int4()))
    if args.head != "model":
        from decoders.backends.quantized import QuantizedLlamaBackend

        family = replace(family, helper=QuantizedLlamaBackend.from_target(family.main, family.main_model,
                                                                          head=args.head))
    engine = Engine(family)  # interleaved: each run decodes its autoregressive baseline beside it
    rows = [json.loads(line) for line in open(args.file)]
    seen, prompts = set(), []
    for row in rows:  # one prompt per task group, then round-robin
        if row["category"] not in seen:
            seen.add(row["category"])
            prompts.append(row)
    prompts = prompts[: args.prompts]
    results = {g: [] for g in range(lo, hi + 1)}
    for row in prompts:
        for gamma in range(lo, hi + 1):
            r = engine.run(row["turns"][0], DecodeParams(method="spec", gamma=gamma, max_new_tokens=args.tokens))
            s = r.summary
            rec = {"category": row["category"], "gamma": gamma, "tokens": s.tokens,
                   "identical": s.identical, "accept_rate": s.accept_rate, "alpha_hat": s.extras.get("alpha_hat"),
                   "c_hat": s.extras.get("c_hat"), "verify_cost": s.verify_cost, "speedup_wall": s.speedup_wall,
                   "speedup_decode": s.speedup_decode, "predicted": s.extras.get("predicted_speedup"),
                   "predicted_cost": s.extras.get("predicted_speedup_cost_aware"),
                   "ar_ms_per_token": s.baseline_ms_per_token, "spec_ms_per_token": s.method_ms_per_token,
                   "load": os.getloadavg()[0]}
            results[gamma].append(rec)
            print(json.dumps(rec), flush=True)
    print("\ngamma | acceptance | alpha_hat | c_hat | verify T | speedup (wall, geo-mean) | predicted "
          "| predicted (cost) | identical")
    for gamma, recs in results.items():
        def mean(key, recs=recs):
            vals = [r[key] for r in recs if r[key] is not None]
            return statistics.fmean(vals) if vals else float("nan")
        geo = statistics.geometric_mean([r["speedup_wall"] for r in recs if r["speedup_wall"]])
        print(f"{gamma} | {mean('accept_rate'):.3f} | {mean('alpha_hat'):.3f} | {mean('c_hat'):.3f} | "
              f"{mean('verify_cost'):.2f} | {geo:.2f}x | {mean('predicted'):.2f}x | {mean('predicted_cost'):.2f}x | "
              f"{all(r['identical'] for r in recs)}")
    print(f"load average {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
