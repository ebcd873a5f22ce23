"""Record one run per method on the bundled model, for the app's snapshot tests.

    python scripts/record_runs.py            # writes tests/data/run_<method>.json

The engine gets a clock that advances a fixed step on every reading, so every time in the
records (and so every figure the app shows) is the same on every machine and every re-recording;
only the tokens come from the model. Greedy decoding on CPU in float32 makes those repeatable too.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METHODS = ("ar", "spec", "pld", "jacobi")
SELF_DRAFT_LAYER = 20


class StepClock:
    """A clock that reads ``step`` seconds later at every call: deterministic "timings"."""

    def __init__(self, step: float):
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def main(argv: list[str] | None = None) -> int:
    from decoders.engine import Engine
    from decoders.models.drafts import EarlyExit
    from decoders.models.families import BUILTIN_FAMILIES, DEFAULT_FAMILY
    from decoders.models.family import load_family
    from tui_decode.state.settings import DEFAULT_PROMPT, START_PARAMS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--step-ms", type=float, default=20.0, help="clock step per reading (default 20 ms)")
    args = parser.parse_args(argv)

    spec = replace(BUILTIN_FAMILIES[DEFAULT_FAMILY], device="cpu", dtype="float32",
                   draft=EarlyExit(layer=SELF_DRAFT_LAYER))
    family = load_family(spec)
    for method in METHODS:
        # a fresh engine and clock per method: each record is independent of the order they run in
        engine = Engine(family, clock=StepClock(args.step_ms / 1000))
        params = START_PARAMS.replace(method=method, max_new_tokens=args.max_new_tokens)
        result = engine.run(DEFAULT_PROMPT, params)
        path = result.save(args.out / f"run_{method}.json")
        s = result.summary
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {s.tokens} tokens, "
              f"{s.iterations} iterations, speedup {s.speedup_wall}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
