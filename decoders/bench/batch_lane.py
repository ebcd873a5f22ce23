"""One backend of a batch bench (`decoders.bench.batch`): a lane, as the suite has one per backend
(`decoders.bench.lanes`). `decoders.bench.batch.run_batch_bench` runs one lane;
`decoders.bench.batch_multi.run_batch_backends` runs one per backend (``--backends``), the lanes
taking turns going first at each batch size. Both take the same steps, all of them here:

* the lane opened (`BatchLane`): its rows, the batch of B rows its backend decodes in
  (`decoders.bench.batch.batch_maker`) and its spec rows' draft (`decoders.bench.batch_spec`);
* its verify-cost surface T(B, k) measured (`BatchLane.measure_surface`);
* each batch size measured (`BatchLane.measure`): autoregressive decoding, then each row, on the
  same B prompts in each round, every sequence checked against its batch-1 autoregressive output
  on the same backend (`BatchLane.reference` keeps those outputs).

In a run on several backends every row, divergence and progress line carries the lane's backend
("pld [llama.cpp]"); in a run on one, nothing does (as before runs on several).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from statistics import mean, stdev
from typing import TYPE_CHECKING

from decoders.bench.batch_identity import Divergence, compare_runs
from decoders.bench.batch_synthetic import SyntheticBatchRow, SyntheticGrid, measure_synthetic
from decoders.bench.common import BACKEND_LABELS, on_backend
from decoders.methods.batch.adaptive import BatchDraftPolicy
from decoders.methods.batch.chain import BatchRun, decode_batch
from decoders.methods.batch.suffix import SuffixShape

if TYPE_CHECKING:
    from decoders.bench.batch import BatchRow, RowSpec


class BatchLane:
    """One backend's batch bench: ``family`` decoding ``prompts`` (its own ids) in the rows of
    ``specs`` beside autoregressive decoding. ``backend``: the lane's backend in a run on several
    (its rows labelled by it); None in a run on one. The other arguments are `run_batch_bench`'s."""

    def __init__(self, family, prompts: Sequence[list[int]], specs: Sequence[RowSpec], max_new: int, rounds: int,
                 k: int, *, backend: str | None = None, synthetic: SyntheticGrid | None = None,
                 suffix: SuffixShape | None = None, clock: Callable[[], float] = time.perf_counter,
                 progress: Callable[[str], None] | None = None,
                 on_step: Callable[[str, int, list], None] | None = None,
                 on_row: Callable[[BatchRow], None] | None = None,
                 on_cell: Callable[[SyntheticBatchRow], None] | None = None) -> None:
        from decoders.bench.batch import batch_maker
        from decoders.bench.batch_spec import spec_drafts

        self.family, self.prompts, self.specs = family, list(prompts), list(specs)
        self.max_new, self.rounds, self.backend = max_new, rounds, backend
        self.synthetic, self.suffix, self.clock = synthetic, suffix, clock
        self.on_step, self.on_row, self.on_cell = on_step, on_row, on_cell
        self._say = progress or (lambda message: None)
        widest_k = max([k, *(spec.k for spec in specs), *(synthetic.gammas if synthetic else [])])
        self.positions = max(len(p) for p in prompts) + max_new + widest_k + 1
        self.lm = batch_maker(family, self.positions)
        self.draft = spec_drafts(family, specs, self.positions)
        self.stop = frozenset(family.stop_ids)
        self.surface: dict[int, list[float]] = {}
        self.unit_ms = 0.0
        self.reference: dict[int, list[int]] = {}  # prompt index -> its batch-1 autoregressive output
        self.rows: list[BatchRow] = []
        self.divergences: list[Divergence] = []
        self.synthetic_rows: list[SyntheticBatchRow] = []

    @property
    def label(self) -> str:
        """The backend as row labels show it ("llama.cpp"); "" in a run on one backend."""
        return BACKEND_LABELS.get(self.backend, self.backend) if self.backend else ""

    def labelled(self, label: str) -> str:
        """A row's label as the report shows it: "pld [llama.cpp]" in a run on several, "pld" in one."""
        return on_backend(label, self.backend) if self.backend else label

    @property
    def labels(self) -> list[str]:
        """Every row's label, autoregressive decoding's first (unlabelled by backend)."""
        return ["ar", *(spec.label for spec in self.specs)]

    def say(self, message: str) -> None:
        self._say(f"[{self.label}] {message}" if self.backend else message)

    def measure_surface(self, batches: Sequence[int], widths: int, repeats: int) -> None:
        """T(B, k) of this lane's backend after its first prompt (`decoders.bench.batch_surface`)."""
        from decoders.bench.batch import batch_maker
        from decoders.bench.batch_surface import measure_surface

        self.say("measuring T(B, k)")
        timed = batch_maker(self.family, len(self.prompts[0]) + widths)
        self.surface, self.unit_ms = measure_surface(self.family.main_model, self.prompts[0], batches, widths=widths,
                                                     repeats=repeats, make=timed)
        del timed  # its contexts go before the decoding's are made

    def ref(self, index: int) -> list[int]:
        """Prompt ``index``'s batch-1 autoregressive output on this backend (decoded once)."""
        if index not in self.reference:
            run = decode_batch(self.lm(1), [self.prompts[index]], self.max_new, "ar", stop_ids=self.stop)
            self.reference[index] = run.rows[0].out
        return self.reference[index]

    def measure(self, size: int) -> None:
        """Every row at batch size ``size`` beside autoregressive decoding, ``rounds`` rounds (round r
        takes the prompts from offset r * B), each sequence checked against its batch-1 output."""
        from decoders.bench.batch import RowSpec

        spec_of = {spec.label: spec for spec in self.specs}
        runs: dict[str, list[BatchRun]] = {m: [] for m in self.labels}
        sets: list[list[int]] = []
        for round_ in range(self.rounds):
            chosen = [(round_ * size + i) % len(self.prompts) for i in range(size)]
            sets.append(chosen)
            for method in self.labels:
                spec = spec_of.get(method) or RowSpec(label="ar", method="ar", k=0)
                chooser = (BatchDraftPolicy(spec.k, self.surface, learn_draft_cost=spec.method == "spec")
                           if spec.policy == "adaptive" and spec.k else None)
                target = self.lm(size)
                run = decode_batch(target, [self.prompts[i] for i in chosen], self.max_new, spec.method, gamma=spec.k,
                                   stop_ids=self.stop, clock=self.clock, policy=chooser,
                                   draft=self.draft(spec, size, target),
                                   on_step=None if self.on_step is None else partial(self.on_step, method, size),
                                   suffix=self.suffix)
                runs[method].append(run)
                self.say(f"batch {size} round {round_ + 1}: {method} {run.throughput:.1f} tok/s")
        for method in self.labels:
            self._row(method, size, sets, runs, spec_of.get(method))
        if self.synthetic is not None:
            cells, parted = measure_synthetic(self.lm, self.prompts, size, self.synthetic, self.rounds, self.max_new,
                                              self.ref, self.surface, self.unit_ms, self.family.vocab_size, self.stop,
                                              self.clock, self.say, on_cell=self.on_cell, on_step=self.on_step)
            self.synthetic_rows += cells
            self.divergences += parted

    def _row(self, method: str, size: int, sets: list[list[int]], runs: dict[str, list[BatchRun]],
             spec: RowSpec | None) -> None:
        from msgspec import UNSET

        from decoders.bench.batch import BatchRow

        parted = compare_runs(self.labelled(method), size, sets, runs[method], self.ref, self.lm, self.prompts)
        self.divergences += parted
        ratios = [m.throughput / a.throughput for m, a in zip(runs[method], runs["ar"], strict=True) if a.throughput]
        last = runs[method][-1]
        self.rows.append(BatchRow(
            method=self.labelled(method), batch=size, throughput=round(mean(r.throughput for r in runs[method]), 3),
            latency_s=round(mean(r.latency_s for r in runs[method]), 4),
            ar_throughput=round(mean(r.throughput for r in runs["ar"]), 3),
            speedup=round(mean(ratios), 3) if ratios else 0.0,
            spread=round(2 * stdev(ratios) / math.sqrt(len(ratios)), 3) if len(ratios) > 1 else None,
            forwards=last.forwards,
            accepted_per_forward=round(last.tokens / max(1, sum(r.iterations for r in last.rows)), 3),
            identical=not parted, policy=spec.policy if spec else "fixed", k=spec.k if spec else 0,
            draft_lengths=list(last.draft_lengths), backend=self.backend or UNSET))
        if self.on_row is not None:
            self.on_row(self.rows[-1])

    def crossover(self) -> dict[str, str]:
        """Where each row beyond autoregressive decoding stops paying, under its report label."""
        from decoders.bench.batch import crossover

        return {self.labelled(m): crossover([r for r in self.rows if r.method == self.labelled(m)])
                for m in self.labels[1:]}
