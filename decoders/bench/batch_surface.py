"""The verify-cost surface T(B, k): the time of one forward over B sequences of k new positions
each, at a context already cached, relative to one position of one sequence (B = 1, k = 1), on
the batched path that batched decoding runs on (`decoders.backends.batched.BatchedLM` on torch,
`decoders.backends.llamacpp_batched.LlamaCppBatched` on llama.cpp).

Each (B, k) is timed ``repeats`` times in rounds (every cell once per round, so the machine's
drift falls on all cells alike), after an untimed round that pays for the shapes; the median is
kept. The cache is cropped back after each timed forward, so every cell runs at the same context.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from statistics import median
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decoders.backends.capabilities import BatchedModel

#: The widths measured: k = 1..16 new positions per sequence.
WIDTHS = 16
BATCHES = (1, 2, 4, 8)
REPEATS = 5


def measure_surface(model, context: Sequence[int], batches: Sequence[int] = BATCHES, widths: int = WIDTHS,
                    repeats: int = REPEATS, clock: Callable[[], float] = time.perf_counter,
                    cancelled: Callable[[], bool] = lambda: False,
                    make: Callable[[int], BatchedModel] | None = None) -> tuple[dict[int, list[float]], float]:
    """``({B: [T(B, 1), ..., T(B, widths)]}, the one-position step in ms)``; T(1, 1) is 1 by
    definition (B = 1 is measured even when not asked for: it is the unit). ``make``: the batch
    of B rows to time (default: torch's `BatchedLM` on ``model``; the llama.cpp backend's
    `LlamaCppBatched` from `decoders.bench.batch.batch_maker`)."""
    if make is None:
        from decoders.backends.batched import BatchedLM

        def make(b: int) -> BatchedModel:
            return BatchedLM(model)

    sizes = sorted(set(batches) | {1})
    models = {}
    for b in sizes:
        lm = make(b)
        lm.start([list(context)] * b)
        models[b] = lm
    token = int(context[-1])
    times: dict[tuple[int, int], list[float]] = {(b, k): [] for b in sizes for k in range(1, widths + 1)}
    for round_ in range(repeats + 1):
        for b in sizes:
            lm = models[b]
            for k in range(1, widths + 1):
                if cancelled():
                    break
                base = lm.slots
                t0 = clock()
                lm.step([[token] * k] * b)
                seconds = clock() - t0
                lm.crop(base)
                if round_:  # the first round pays for the shapes, untimed
                    times[(b, k)].append(seconds)
    unit = median(times[(1, 1)])
    surface = {b: [round(median(times[(b, k)]) / unit, 3) for k in range(1, widths + 1)]
               for b in sizes if b in batches}
    return surface, round(1000 * unit, 3)


def surface_table(surface: dict[int, list[float]], unit_ms: float) -> str:
    """T(B, k) as a markdown table: a row per B, a column per k."""
    widths = max((len(row) for row in surface.values()), default=0)
    lines = [f"T(B, k): one forward over B sequences of k positions, in one-position steps of one sequence "
             f"({unit_ms:.2f} ms)", "",
             "| B | " + " | ".join(f"k={k}" for k in range(1, widths + 1)) + " |",
             "|---|" + "---|" * widths]
    for b in sorted(surface):
        lines.append(f"| {b} | " + " | ".join(f"{t:.2f}" for t in surface[b]) + " |")
    return "\n".join(lines)
