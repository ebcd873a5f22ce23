"""Each sequence decoded at batch B against its batch-1 autoregressive output (the batch bench,
`decoders.bench.batch`, and its synthetic rows, `decoders.bench.batch_synthetic`): where one parts
from it, the position and batch 1's top-2 margin there (a margin near float32 noise is a near tie
the batched kernels broke the other way)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from decoders.records.codec import Record

if TYPE_CHECKING:
    from decoders.backends.capabilities import BatchedModel
    from decoders.methods.batch.chain import BatchRun


class Divergence(Record, kw_only=True):
    """Where a sequence decoded at batch B parted from its batch-1 output."""

    method: str
    batch: int
    row: int
    position: int
    margin: float  # batch 1's top-1 minus top-2 logit there


def margin(lm_factory: Callable[[int], BatchedModel], prompt: list[int], prefix: list[int]) -> float:
    """Batch 1's top-1 minus top-2 logit after ``prompt + prefix``."""
    lm = lm_factory(1)
    logits = lm.start([prompt + prefix])[0]
    top = logits.topk(2).values.tolist()
    return round(top[0] - top[1], 6)


def compare_runs(method: str, size: int, sets: Sequence[Sequence[int]], runs: Sequence[BatchRun],
                 ref: Callable[[int], list[int]], lm_factory: Callable[[int], BatchedModel],
                 prompts: Sequence[list[int]]) -> list[Divergence]:
    """Each row of each run (run r decoded the prompts ``sets[r]``) against ``ref`` of its prompt:
    a `Divergence` per row that parts from it (none: every row identical)."""
    found = []
    for chosen, run in zip(sets, runs, strict=True):
        for row_index, (index, row) in enumerate(zip(chosen, run.rows, strict=True)):
            expected = ref(index)
            if row.out != expected:
                at = next((j for j, (a, b) in enumerate(zip(row.out, expected, strict=False)) if a != b),
                          min(len(row.out), len(expected)))
                found.append(Divergence(method=method, batch=size, row=row_index, position=at,
                                        margin=margin(lm_factory, prompts[index], expected[:at])))
    return found
