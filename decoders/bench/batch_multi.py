"""The batch bench on several backends in one run (`tui-decode bench --batch 1,2,4,8 --backends
torch,llamacpp`): one lane per backend (`decoders.bench.batch_lane.BatchLane`), as the suite runs
one per backend (`decoders.bench.multi`).

The same GGUF file loaded by each backend, the same prompts (each backend's own ids for them),
the same rows. Each lane measures its own verify-cost surface T(B, k); at each batch size the
lanes take turns going first (torch, llama.cpp at the first size; llama.cpp, torch at the next),
so that load from other processes hits them alike. Every row's speedup is over autoregressive
decoding at the same batch size on its own backend, every sequence is checked against its
batch-1 autoregressive output on its own backend, and the two backends' batch-1 outputs are
compared token by token (`decoders.bench.suite.Agreement`, with each side's top-2 margin where
they part). A row a backend cannot batch (speculative decoding with a draft that backend cannot
run: a trained head or the int4 self-draft on llama.cpp) is left out on that backend, with the
line saying why in its side's ``left_out``; a row no backend can batch is refused in one line.

The report is one `decoders.bench.batch.BatchReport`: rows labelled by backend ("pld [llama.cpp]"),
each backend's surface and rows in ``backends``; its ``family``, ``surface`` and
``surface_unit_ms`` are the first backend's (what a reader of one-backend reports finds there).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from decoders.analysis.summary import first_divergence
from decoders.bench.batch import BatchReport, BatchSide, row_specs
from decoders.bench.batch_lane import BatchLane
from decoders.bench.batch_surface import WIDTHS
from decoders.bench.common import on_backend
from decoders.bench.machine import BatchMachine
from decoders.bench.settings import BatchSettings
from decoders.bench.suite import Agreement
from decoders.core.errors import DecodeError
from decoders.methods.batch.suffix import SuffixShape


def batchable(family, specs, reason: str | None = None) -> tuple[list, str | None]:
    """``specs`` without the spec rows where ``family`` cannot draft at batch B, and why (None: it
    can, or no row is a spec row). ``reason``: why its draft was not loaded, said in place of
    `decoders.bench.batch_spec.check_spec`'s line."""
    if not any(spec.method == "spec" for spec in specs):
        return list(specs), None
    if reason is None:
        from decoders.bench.batch_spec import check_spec

        try:
            check_spec(family)
            return list(specs), None
        except DecodeError as exc:
            reason = str(exc)
    return [spec for spec in specs if spec.method != "spec"], reason


def agreement(lanes: Mapping[str, BatchLane], questions: Sequence[tuple[Any, str]] | None = None
              ) -> list[Agreement]:
    """The first two lanes' batch-1 autoregressive outputs on every prompt both decoded, token by
    token; where they part, each side's top-2 logits after the prefix they share (the first side's
    prompt ids). ``questions``: each prompt's question id and category (default: its index)."""
    from decoders.bench.multi import parted_at

    (one, first), (other, second) = list(lanes.items())[:2]
    found = []
    for index in sorted(set(first.reference) & set(second.reference)):
        a, b = first.reference[index], second.reference[index]
        d = first_divergence(a, b)
        qid, category = questions[index] if questions is not None else (index, "")
        entry = Agreement(question_id=qid, category=category, repeat=0, backends=[one, other],
                          tokens=[len(a), len(b)], identical=d is None, first_divergence=d)
        if d is not None:
            entry = parted_at(entry, list(first.prompts[index]), a, b, d, [first.family, second.family])
        found.append(entry)
    return found


def run_batch_backends(families: Mapping[str, Any], prompts: Mapping[str, Sequence[list[int]]],
                       batches: Sequence[int], methods: Sequence[str], max_new: int, rounds: int = 2, k: int = 10,
                       surface_repeats: int = 5, surface_widths: int = WIDTHS,
                       progress: Callable[[str], None] | None = None, clock: Callable[[], float] = time.perf_counter,
                       machine: BatchMachine | None = None, policy: str = "fixed",
                       variants: Sequence[Any] | None = None, suffix: SuffixShape | None = None,
                       lengths: dict[str, int] | None = None, unloaded: Mapping[str, str] | None = None,
                       questions: Sequence[tuple[Any, str]] | None = None) -> BatchReport:
    """`decoders.bench.batch.run_batch_bench` on each backend of ``families`` ({"torch": ...,
    "llamacpp": ...}, the same model loaded by each; two or more), ``prompts`` each backend's ids of
    the same prompts; one report. ``unloaded``: per backend, why its draft was not loaded (its spec
    rows are left out, saying so); ``questions``: each prompt's question id and category, for the
    agreement. The other arguments are `run_batch_bench`'s (no synthetic grid: one backend's)."""
    if len(families) < 2:
        raise DecodeError("a batch bench on several backends needs two or more; for one, use run_batch_bench")
    say = progress or (lambda message: None)
    started = clock()
    specs = row_specs(methods, k, policy, variants, lengths)
    lanes: dict[str, BatchLane] = {}
    left_out: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    notes: list[str] = []
    for backend, family in families.items():
        own, why = batchable(family, specs, (unloaded or {}).get(backend))
        reasons[backend] = why or ""
        left_out[backend] = [f"{on_backend(spec.label, backend)} left out: {why}" for spec in specs if spec not in own]
        lanes[backend] = BatchLane(family, prompts[backend], own, max_new, rounds, k, backend=backend, suffix=suffix,
                                   clock=clock, progress=progress)
    nowhere = [spec for spec in specs if all(spec not in lane.specs for lane in lanes.values())]
    if nowhere:  # a row no backend can batch is refused, as on one backend
        raise DecodeError(f"no backend can run {nowhere[0].label} at batch > 1: {reasons[next(iter(lanes))]}")
    first = next(iter(lanes.values()))
    differ = [i for i in range(len(first.prompts)) if any(lane.prompts[i] != first.prompts[i]
                                                          for lane in lanes.values())]
    if differ:
        notes.append(f"the backends' tokenizers give different ids for {len(differ)} prompt(s); each runs its own")
    for lane in lanes.values():
        lane.measure_surface(batches, surface_widths, surface_repeats)
    for turn, size in enumerate(batches):
        ordered = list(lanes.values())
        for lane in ordered if turn % 2 == 0 else ordered[::-1]:  # who goes first alternates by batch size
            lane.measure(size)
    say("comparing the backends' batch-1 outputs")
    agreed = agreement(lanes, questions)
    order = {size: i for i, size in enumerate(batches)}
    # each batch size: the lanes' rows in the lanes' order (a stable sort)
    rows = sorted((row for lane in lanes.values() for row in lane.rows), key=lambda r: order[r.batch])
    sides = {backend: BatchSide(backend=backend, label=lane.label, family=lane.family.describe(),
                                surface={str(b): t for b, t in lane.surface.items()}, surface_unit_ms=lane.unit_ms,
                                methods=[lane.labelled(m) for m in lane.labels], left_out=left_out[backend])
             for backend, lane in lanes.items()}
    return BatchReport(
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), family=first.family.describe(),
        machine=machine or BatchMachine(),
        settings=BatchSettings(batches=list(batches), methods=[m for side in sides.values() for m in side.methods],
                               max_new_tokens=max_new, rounds=rounds, k=k, prompts=len(first.prompts),
                               draft_policy=policy, backends=list(families)),
        surface={str(b): t for b, t in first.surface.items()}, surface_unit_ms=first.unit_ms, rows=rows,
        crossover={label: text for lane in lanes.values() for label, text in lane.crossover().items()},
        divergences=[d for lane in lanes.values() for d in lane.divergences], notes=notes,
        elapsed_s=round(clock() - started, 1), backends=sides, agreement=agreed)
