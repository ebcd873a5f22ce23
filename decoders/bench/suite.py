"""The benchmark: every method on every prompt, ours and transformers' interleaved, into a report.

* every row of ours is paired with its own autoregressive baseline as the app pairs a run
  (interleaved, step by step on a second cache: `decoders.bench.measure.bench_engine`), and each
  prompt is warmed up before any of it is timed (`decoders.engine.Engine.warm`), so that the
  bench, the sweep, ``tui-decode run`` and the app measure the same decode the same way;
* every output is compared with the autoregressive baseline and with transformers' output, and
  the first divergence is kept, never hidden;
* the memory-bandwidth floor (weight bytes / read bandwidth measured in the same run) says how
  far one decode step is from what the hardware allows.

The report's records (`BenchReport`, and a run on several backends' `BackendSide` and
`Agreement`) are declared here; the run itself is one lane of `decoders.bench.lanes`, the shape a
run on several backends (`decoders.bench.multi`) takes too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Sequence

import msgspec
from msgspec import UNSET, UnsetType

from decoders.bench.aggregate import Figures, MethodStats
from decoders.bench.entries import Sample
from decoders.bench.inputs import ProgressFn, created, prompt_records
from decoders.bench.lanes import lane_settings, run_lanes
from decoders.bench.machine import BenchMachine, CostCurve, Floor, machine_info
from decoders.bench.prompts import BenchPrompt, PromptRecord
from decoders.bench.reference import Reference
from decoders.bench.session import WORKLOADS, SessionFigures, remembers, session_figures
from decoders.bench.settings import BenchSettings, MemorySettings
from decoders.bench.targets import Target
from decoders.bench.variants import Variant
from decoders.core.params import DecodeParams
from decoders.records.codec import Record
from decoders.records.family_info import FamilyInfo

if TYPE_CHECKING:
    from decoders.methods.shared.suffix_memory import SuffixMemory
    from decoders.models.family import Family

REPORT_SCHEMA = 1


class BackendSide(Record, kw_only=True):
    """One backend of a run on several (`decoders.bench.multi`): what ran, its floor and T(k), its rows."""

    backend: str  # "torch", "llamacpp"
    label: str  # how row labels carry it: "torch", "llama.cpp"
    family: FamilyInfo  # `family_info`: weight_bytes, backend class
    floor: Floor
    verify_cost_curve: CostCurve
    reference: str  # the side measured beside it: "transformers", "llama-cpp-python"
    rows: list[str]  # its rows' labels in the report's figures, its AR first
    counterparts: dict[str, str | None]  # row label -> the reference's call beside it


class Agreement(Record, kw_only=True):
    """Two backends' autoregressive outputs on one prompt run, token by token: identical, or the first
    position where they part with each side's top-2 logits there (after the prefix they share), so that
    a near-tie (a small margin) reads as one."""

    question_id: Any
    category: str
    repeat: int
    backends: list[str]  # [first, second]: first is the side whose margin judges the tie
    tokens: list[int]  # each side's output length
    identical: bool
    first_divergence: int | None = None
    chosen: list[int | None] = msgspec.field(default_factory=list)  # each side's token there (None: it had stopped)
    chosen_text: list[str | None] = msgspec.field(default_factory=list)  # those tokens as the token strip shows them
    top2: list[list[int]] = msgspec.field(default_factory=list)  # each side's two best tokens there
    margin: list[float | None] = msgspec.field(default_factory=list)  # each side's top-1 minus top-2 logit there


class BenchReport(Record, kw_only=True):
    """A whole benchmark run as report.json holds it (schema ``REPORT_SCHEMA``): `Figures`'
    overall, groups and group_prompts beside the run's other fields."""

    schema: int = REPORT_SCHEMA
    kind: Literal["bench"] = "bench"
    created: str = msgspec.field(default_factory=created)
    family: FamilyInfo
    machine: BenchMachine
    settings: BenchSettings
    prompts: list[PromptRecord]
    bandwidth: dict[str, Any]  # runs (each measure_read_bandwidth's figures), best_gb_per_s
    floor: Floor
    overall: dict[str, MethodStats]
    groups: dict[str, dict[str, MethodStats]]
    group_prompts: dict[str, int]  # distinct prompts per group
    samples: list[Sample]
    notes: list[str]
    targets: list[Target] = msgspec.field(default_factory=list)
    elapsed_s: float = 0.0
    # a run of the same model on several backends (`decoders.bench.multi`): each backend's own figures
    # (the fields above hold the first one's family and floor)
    # (left out, UNSET, in a run on one backend, so that reports from before them read back as written)
    backends: dict[str, BackendSide] | UnsetType = UNSET
    agreement: list[Agreement] | UnsetType = UNSET
    # a run of one session (``--workload session``, `decoders.bench.session`): its order, the memory
    # rows' speedup by position and every row's per turn (left out in a run of separate prompts)
    session: SessionFigures | UnsetType = UNSET

    @property
    def sides(self) -> dict[str, BackendSide]:
        """Each backend's figures in a run on several; empty in a run on one."""
        return {} if isinstance(self.backends, UnsetType) else self.backends

    @property
    def agreements(self) -> list[Agreement]:
        return [] if isinstance(self.agreement, UnsetType) else self.agreement

    @property
    def figures(self) -> Figures:
        return Figures(self.overall, self.groups, self.group_prompts)


def run_bench(family: Family, prompts: Sequence[BenchPrompt], methods: Sequence[str] | str | None = None,
              max_new_tokens: int = 64, limit: int | None = None, repeats: int = 1,
              progress: ProgressFn | None = None, *, params: DecodeParams | None = None,
              reference: Reference | None = None, record_overhead_every: int = 3,
              bandwidth_bytes: int = 1 << 30, warm_up: bool = True,
              variants: Sequence[Variant] | None = None, early_exit_layer: int | None = None,
              workload: str = "prompts", memory: SuffixMemory | None = None) -> BenchReport:
    """Run every row on every prompt, ours and transformers' interleaved; the report.

    ``methods``: names of registered methods, each a row as ``params`` sets it; ``variants``:
    more rows, each a method with its own overrides and draft (`decoders.bench.variants`);
    neither: the default rows (every method, plus the variants the open targets ask about).
    Greedy is forced. ``early_exit_layer``: the layer an early-exit row drafts with when
    neither it nor the family names one.
    On every ``record_overhead_every``-th prompt (0: never) each drafting row also runs with
    ``record=True`` beside ``record=False``, to measure what recording costs; every prompt
    would double the time of the slowest methods for a figure that needs fewer samples.
    ``warm_up``: one untimed pass of every row at the start, and each prompt warmed up before it
    is timed (off: quicker, and first decodes slower than later ones; for tests).
    ``workload``: "prompts", each prompt on its own, or "session", the prompts in order as one
    session, every turn of a multi-turn question, each row that drafts from a memory with its own
    (`decoders.bench.session`).
    ``memory``: a suffix memory read from a file (`decoders.methods.shared.suffix_memory.read_memory`):
    the memory rows draft from it (in a session, each from a copy of its own); it is never written.
    """
    if workload not in WORKLOADS:
        raise ValueError(f"workload must be one of {', '.join(WORKLOADS)}, got {workload!r}")
    # the memory as read, before the bench's answers join it (outside a session they join it)
    started_from = (MemorySettings(path=str(memory.source or ""), responses=len(memory), tokens=memory.tokens)
                    if memory is not None else None)
    run = run_lanes({family.backend: family}, prompts, methods, max_new_tokens, limit, repeats, progress,
                    params=params, references={family.backend: reference} if reference is not None else None,
                    record_overhead_every=record_overhead_every, bandwidth_bytes=bandwidth_bytes, warm_up=warm_up,
                    variants=variants, early_exit_layer=early_exit_layer, workload=workload, memory=memory)
    (lane,), (figures,) = run.lanes, run.figures
    settings = lane_settings(run.base, lane.rows, limit, repeats, lane.reference, record_overhead_every, lane.pairing)
    session: SessionFigures | UnsetType = UNSET
    if workload == "session":
        memory_rows = [row.label for row in lane.rows if remembers(row)]
        session = session_figures(lane.samples, figures.labels, memory_rows)
        settings.workload = "session"
    if memory is not None:
        settings.suffix_memory = started_from or UNSET
    return BenchReport(
        family=figures.info,
        machine=BenchMachine.of(machine_info(), run.load_at_start, run.curves[lane.backend]),
        settings=settings,
        prompts=prompt_records(lane.runnable), bandwidth=run.bandwidth_record(), floor=figures.floor,
        overall=figures.figures.overall, groups=figures.figures.groups, group_prompts=figures.figures.group_prompts,
        samples=lane.samples, notes=run.notes, targets=figures.targets, elapsed_s=run.elapsed_s(), session=session)
