"""Does the speedup hold when the machine changes mid-run? On the bundled model, one torch thread:

1. the two steady states: speculative decoding on a quiet machine and with a competing process
   (a float32 matmul loop on one thread) busy throughout, ``--steady`` runs each;
2. ``--runs`` runs with the competitor started (odd runs) or stopped (even runs) halfway through;
3. autoregressive decoding against its own baseline, ``--runs`` runs toggled the same way;
4. the same toggled runs with the sequential pairing (the baseline decoded first on a quiet
   machine and reused, a probe after the run), for contrast.

A toggled run passes when its decode speedup lies in [lowest steady - spread, highest steady +
spread] (the true speedup itself moves with the load); autoregressive passes when 1.00x lies within
its spread. Prints one line per run and the counts; run it alone (another job on the machine is
another competitor).

    PYTHONPATH=. python scripts/pairing_check.py [--runs 10] [--steady 2] [--tokens 64] [--method spec]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace

COMPETITOR = ("import torch\ntorch.set_num_threads(1)\na = torch.randn(1024, 1024)\n"
              "while True:\n    a = torch.tanh(a @ a)\n")
PROMPT = ("Explain, in a few short paragraphs, how a refrigerator keeps food cold: the compressor, the "
          "refrigerant, the coils inside and outside, and why the back of the fridge feels warm.")


class Competitor:
    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, "-c", COMPETITOR])

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def timed_run(engine, params, competitor: Competitor, toggle_after: float | None, start: bool):
    """One run; when ``toggle_after`` is given, the competitor is started (or stopped) that many
    seconds into it."""
    timer = None
    if toggle_after is not None:
        timer = threading.Timer(toggle_after, competitor.start if start else competitor.stop)
        timer.start()
    t0 = time.perf_counter()
    result = engine.run(PROMPT, params)
    if timer is not None:
        timer.cancel()
    return result, time.perf_counter() - t0


def line(tag: str, s, ok: bool | None = None) -> str:
    spread = f"+/- {s.speedup_spread:.3f}" if s.speedup_spread is not None else "+/- ?"
    extra = f"machine {s.machine_change:.2f}x" if s.machine_change is not None else f"drift {s.drift}"
    raw = f" raw {s.speedup_decode_raw:.3f}" if s.speedup_decode_raw is not None else ""
    verdict = "" if ok is None else ("  ok" if ok else "  OUT")
    return (f"{tag:<28} {s.speedup_decode:.3f}x {spread}{raw}  {extra}  tau {s.tau}  "
            f"load {os.getloadavg()[0]:.2f}{verdict}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--steady", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--method", default="spec")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from decoders.core.params import DecodeParams
    from decoders.engine import Engine
    from decoders.models.families import BUILTIN_FAMILIES
    from decoders.models.family import load_family

    family = load_family(replace(BUILTIN_FAMILIES["smollm2-135m"], device="cpu", dtype="float32"))
    # a fixed draft length: the adaptive policy reads the machine's speed, so under a changing load it
    # would change the work itself, and the true speedup with it
    params = DecodeParams(method=args.method, max_new_tokens=args.tokens, draft_policy="fixed")
    ar = params.replace(method="ar")
    engine = Engine(family)
    competitor = Competitor()
    print(f"family {family.label}, helper {family.helper_source}, {args.tokens} tokens, 1 thread", flush=True)
    try:
        engine.run(PROMPT, params.replace(max_new_tokens=8))  # warm-up
        steady = []
        for loaded in (False, True):
            (competitor.start if loaded else competitor.stop)()
            time.sleep(1.0 if loaded else 0.5)
            for i in range(args.steady):
                result, wall = timed_run(engine, params, competitor, None, False)
                steady.append(result.summary.speedup_decode)
                print(line(f"steady {'loaded' if loaded else 'quiet'} {i + 1}", result.summary), flush=True)
        competitor.stop()
        lo, hi = min(steady), max(steady)
        print(f"steady range {lo:.3f}..{hi:.3f}", flush=True)
        half = wall / 2  # a run's length, roughly: the toggle lands inside it
        kinds = [("interleaved " + args.method, engine, params), ("interleaved ar", engine, ar)]
        sequential = Engine(family, pairing="sequential")
        kinds.append(("sequential " + args.method, sequential, params))
        for name, eng, p in kinds:
            inside = 0
            for i in range(args.runs):
                start = i % 2 == 0
                (competitor.stop if start else competitor.start)()
                time.sleep(0.5)
                if eng is sequential:
                    competitor.stop()
                    time.sleep(0.5)
                    eng.forget_baselines()
                    eng.run(PROMPT, p.replace(max_new_tokens=p.max_new_tokens))  # the baseline, quiet
                    if not start:
                        competitor.start()
                        time.sleep(0.5)
                result, _ = timed_run(eng, p, competitor, half, start)
                s = result.summary
                spread = s.speedup_spread or 0.0
                if p.method == "ar":
                    ok = abs(s.speedup_decode - 1.0) <= spread
                else:
                    ok = lo - spread <= s.speedup_decode <= hi + spread
                inside += ok
                print(line(f"{name} {'start' if start else 'stop'} {i + 1}", s, ok), flush=True)
            print(f"{name}: {inside}/{args.runs} inside", flush=True)
    finally:
        competitor.stop()


if __name__ == "__main__":
    main()
