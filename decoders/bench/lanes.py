"""One bench shape for one backend or several: each backend is a lane.

A lane is what one backend measures: its family, its reference (the side measured beside it:
transformers' ``generate()``, llama-cpp-python's own loop), its rows, the prompts it can run and
the engine its rows are measured with. `decoders.bench.suite.run_bench` runs one lane;
`decoders.bench.multi.run_backends` runs one per backend, the lanes taking turns going first
prompt by prompt. Both take the same steps, all of them here (`run_lanes`):

* each lane opened (`open_lane`): its rows (`lane_rows`), the prompts that fit, its engine
  (`decoders.bench.measure.bench_engine`); the prompts every lane can run (`prompt_runs`);
* the read bandwidth measured, every lane warmed up (`warm_up_rows`), every prompt measured on every
  lane (`decoders.bench.measure.PromptMeasurer`), each lane's verify-cost curve T(k), the read
  bandwidth again;
* each lane's figures, bandwidth floor and targets (`LaneFigures`).

What is left to each shape is its report: one lane's figures as they are, or every lane's under
its backend's label beside the agreement of their outputs.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from decoders.bench.aggregate import Figures, aggregate
from decoders.bench.common import BACKEND_LABELS, BASELINE, on_backend
from decoders.bench.drafts import Drafts, Row, default_variants, resolve_rows
from decoders.bench.entries import Sample
from decoders.bench.inputs import Prepared, ProgressFn, base_params, head, parse_methods, prepare, shortest
from decoders.bench.machine import (
    CostCurve,
    Floor,
    bandwidth_floor,
    busy_note,
    family_info,
    load_average,
    measure_read_bandwidth,
    verify_cost_curve,
)
from decoders.bench.measure import AGAIN, PromptMeasurer, bench_engine, pairing_note, pairing_of
from decoders.bench.prompts import BenchPrompt, session_turns
from decoders.bench.reference import Reference, reference_for
from decoders.bench.session import SessionMemories
from decoders.bench.settings import BenchSettings, Pairing
from decoders.bench.targets import Target, evaluate_targets
from decoders.bench.variants import Variant
from decoders.core.declarations import get_method
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.methods.shared.suffix_memory import SuffixMemory, memory_in_use
from decoders.records.family_info import FamilyInfo

if TYPE_CHECKING:
    from decoders.engine import Engine
    from decoders.models.family import Family

#: The prompts of a run with each lane's ids for them: ``(prompt, {backend: ids})``.
PromptRuns = list[tuple[BenchPrompt, dict[str, list[int]]]]


@dataclass
class Lane:
    """One backend of the run: its family, its reference, its rows and what it measured."""

    backend: str
    family: Family
    reference: Reference
    rows: list[Row]
    runnable: Prepared
    engine: Engine  # the engine its rows are measured with (`bench_engine`), built once
    samples: list[Sample] = field(default_factory=list)
    twins: int = 0  # prompts on which its rows also ran with recording on

    @property
    def pairing(self) -> Pairing:
        return pairing_of(self.engine)

    @property
    def label(self) -> str:
        return BACKEND_LABELS.get(self.backend, self.backend)

    def labelled(self, label: str) -> str:
        return on_backend(label, self.backend)


def lane_rows(family: Family, methods, variants, base: DecodeParams, reference: Reference,
              early_exit_layer: int | None, notes: list[str]) -> list[Row]:
    """The rows to measure: the methods named (each as the flags set it) then the variants named;
    neither named: the default rows (`drafts.default_variants`)."""
    drafts = Drafts(family, reference, early_exit_layer)
    if methods is None and variants is None:
        chosen = list(default_variants(family, drafts, notes))
    else:
        chosen = [Variant(m) for m in (parse_methods(methods) if methods else ()) if m != BASELINE]
        chosen += [v for v in variants or () if v.method != BASELINE and v not in chosen]
    rows = resolve_rows(drafts, chosen, base, notes)
    for row in rows:
        if row.counterpart is None:
            what = (f"{row.label} has no {reference.name} counterpart" if not row.variant.plain else
                    f"{get_method(row.method).label} has no {reference.name} counterpart")
            notes.append(what + "; only our figures are shown")
        elif row.closest_only:
            notes.append(f"{row.label}: {reference.name} verifies one linear draft, so its counterpart is the "
                         f"closest one, `{row.counterpart}`")
    return rows


def prompt_runs(lanes: Sequence[Lane], notes: list[str]) -> PromptRuns:
    """The prompts every backend can run, each with every backend's ids (the same file's tokenizer:
    a prompt whose ids differ is run with each backend's own and noted)."""
    by_lane = [{prompt.name: (prompt, ids) for prompt, ids in lane.runnable} for lane in lanes]
    runs = []
    for prompt, _ in lanes[0].runnable:
        if not all(prompt.name in found for found in by_lane):
            notes.append(f"{prompt.name} ({prompt.category}) skipped: not every backend can run it")
            continue
        ids = {lane.backend: found[prompt.name][1] for lane, found in zip(lanes, by_lane, strict=True)}
        if len({tuple(v) for v in ids.values()}) > 1:
            notes.append(f"{prompt.name}: the backends' tokenizers give different prompt ids; each runs its own")
        runs.append((prompt, ids))
    if not runs:
        raise DecodeError("no prompt fits every backend's context with this token budget; lower --max-new-tokens "
                          "or use shorter prompts")
    return runs


FP16_NOTE = ("float16 weights on CPU: transformers runs the float32 model, so \"matches tf\" also counts outputs "
             "that part at near-ties; \"identical to AR\" is the float16 check")


def open_lane(backend: str, family: Family, prompts: Sequence[BenchPrompt], methods, variants,
              base: DecodeParams, limit: int | None, reference: Reference | None, early_exit_layer: int | None,
              notes: list[str]) -> Lane:
    """One backend's lane: its reference (``reference``, else the family's own), its rows, the
    prompts that fit and its engine; what it notes on the way is added to ``notes``."""
    from decoders.backends.fp16_cpu import Fp16LlamaBackend

    if isinstance(family.main, Fp16LlamaBackend):
        notes.append(FP16_NOTE)
    reference = reference or reference_for(family)
    rows = lane_rows(family, methods, variants, base, reference, early_exit_layer, notes)
    runnable = prepare(family, prompts, limit, base, notes)
    return Lane(backend, family, reference, rows, runnable, bench_engine(family))


def warm_up_rows(engine: Engine, reference: Reference, prompt: BenchPrompt, ids: list[int], base: DecodeParams,
                 rows: Sequence[Row]) -> None:
    """One short untimed pass of every decoder (Spec-Bench warms up too): first calls pay for
    allocator growth and lazy initialisation that no later run pays. Each prompt is warmed up
    again before it is timed (`PromptMeasurer.warm_up`); this pass also warms every row's own
    shapes (its verify widths, its draft's first use)."""
    short = base.replace(max_new_tokens=min(8, base.max_new_tokens))
    engine.run(prompt.text, short)
    calls = {reference.counterpart(BASELINE, short)}
    reference.run(BASELINE, ids, short)
    for row in rows:
        engine.draft_with(row.family)
        params = row.params.replace(max_new_tokens=short.max_new_tokens)
        engine.run(prompt.text, params)
        if row.counterpart is not None and row.counterpart not in calls:
            calls.add(row.counterpart)
            row.reference.run(row.method, ids, params)


def lane_settings(base: DecodeParams, rows: Sequence[Row], limit: int | None, repeats: int, reference: Reference,
                  record_overhead_every: int, pairing: Pairing = "sequential"
                  ) -> BenchSettings:
    return BenchSettings(
        reference=reference.name,
        methods=[BASELINE] + [row.label for row in rows], max_new_tokens=base.max_new_tokens, limit=limit,
        repeats=repeats, chat_template=base.chat_template, mode="greedy",
        decode_params=base.to_json(), early_exit_layer=reference.early_exit_layer,
        record_overhead_every=record_overhead_every,
        variants=[row.settings() for row in rows],
        transformers_counterparts={BASELINE: reference.counterpart(BASELINE, base),
                                   **{row.label: row.counterpart for row in rows}},
        # how each row of ours was paired with autoregressive decoding (`decoders.engine.PAIRINGS`)
        pairing={label: pairing for label in [BASELINE, AGAIN] + [row.label for row in rows]},
    )


@dataclass
class LaneFigures:
    """What one lane measured, pooled: its figures, its family's description, its bandwidth floor
    and its targets judged."""

    figures: Figures
    info: FamilyInfo  # `family_info`: weight_bytes, backend class
    floor: Floor
    targets: list[Target]
    labels: list[str]  # its rows' labels, its AR and AR again first


def lane_figures(lane: Lane, best: dict[str, Any]) -> LaneFigures:
    """``lane``'s samples pooled per row, its floor at the run's best read bandwidth ``best``, and
    its targets judged."""
    labels = [BASELINE, AGAIN] + [row.label for row in lane.rows]
    figures = aggregate(lane.samples, labels)
    info = family_info(lane.family)
    ar = figures.overall[BASELINE]
    floor = bandwidth_floor(best, info.weight_bytes or 0, ar.ours.ms_per_token, ar.ours.decode_step_ms,
                            ar.theirs.ms_per_token if ar.theirs else None)
    methods_of = {BASELINE: BASELINE, **{row.label: row.method for row in lane.rows}}
    targets = evaluate_targets(figures, methods_of, lane.samples, floor.floor_ms, lane.reference.ar_goal)
    return LaneFigures(figures, info, floor, targets, labels)


@dataclass
class LaneRun:
    """A run of one lane or several, measured: every lane with its samples and figures, the prompts
    run, the notes, the read bandwidth at start and end, and each lane's verify-cost curve."""

    lanes: list[Lane]
    runs: PromptRuns
    notes: list[str]
    load_at_start: list[float] | None
    bandwidth: list[dict[str, Any]]  # `measure_read_bandwidth`'s figures, at start and at the end
    curves: dict[str, CostCurve]  # backend -> its verify-cost curve
    figures: list[LaneFigures]  # each lane's, in the lanes' order
    base: DecodeParams
    started: float

    @property
    def best(self) -> dict[str, Any]:
        return max(self.bandwidth, key=lambda b: b["gb_per_s"])

    def bandwidth_record(self) -> dict[str, Any]:
        return {"runs": self.bandwidth, "best_gb_per_s": self.best["gb_per_s"]}

    def elapsed_s(self) -> float:
        return round(time.perf_counter() - self.started, 1)


def run_lanes(families: Mapping[str, Family], prompts: Sequence[BenchPrompt], methods: Sequence[str] | str | None,
              max_new_tokens: int, limit: int | None, repeats: int, progress: ProgressFn | None, *,
              params: DecodeParams | None, references: Mapping[str, Reference] | None, record_overhead_every: int,
              bandwidth_bytes: int, warm_up: bool, variants: Sequence[Variant] | None,
              early_exit_layer: int | None, workload: str = "prompts", memory: SuffixMemory | None = None) -> LaneRun:
    """Every row on every prompt on each backend of ``families`` (one: a plain run), each beside its
    reference (``references``, else each family's own); the arguments are `decoders.bench.suite.run_bench`'s.
    In a run on several backends, notes and progress carry the backend, and each sample names it."""
    if memory is not None and len(families) > 1:
        raise ValueError("a suffix memory is read for one model: give it to a run on one backend")
    started = time.perf_counter()
    say = progress or (lambda message: None)
    base = base_params(params, max_new_tokens, repeats)
    if not isinstance(record_overhead_every, int) or record_overhead_every < 0:
        raise DecodeError(f"record_overhead_every must be an integer >= 0, got {record_overhead_every!r}")
    several = len(families) > 1
    notes: list[str] = []

    def noted(label: str, found: Sequence[str | None]) -> list[str]:
        return [f"[{label}] {note}" if several else note for note in found if note]

    lanes = []
    for backend, family in families.items():
        own: list[str] = []
        lanes.append(open_lane(backend, family, prompts, methods, variants, base, limit,
                               (references or {}).get(backend), early_exit_layer, own))
        notes += noted(BACKEND_LABELS.get(backend, backend), own)
    runs = prompt_runs(lanes, notes)

    load_at_start = load_average()
    notes += filter(None, [busy_note(load_at_start)])
    say("measuring memory read bandwidth")
    bandwidth = [measure_read_bandwidth(bandwidth_bytes)]
    for lane in lanes:
        notes += noted(lane.label, [pairing_note(lane.engine)])
    session = workload == "session"
    # the memory read from a file (``--suffix-memory``): in a session each memory row starts from a
    # copy of it; otherwise it is the model's memory while the prompts run (the bench's answers join
    # it in this process only: it is kept nowhere)
    in_use = memory_in_use(lanes[0].family, memory) if memory is not None and not session else nullcontext()
    with in_use:
        _measure(lanes, runs, base, repeats, record_overhead_every, warm_up, say, notes, session=session,
                 seed=memory)
    middle = sorted(runs, key=lambda run: len(run[1][lanes[0].backend]))[len(runs) // 2][1]
    curves = {}
    for lane in lanes:
        say(f"measuring the verify-cost curve T(k), k = 1..16{_where(lanes, lane)}")
        curves[lane.backend] = verify_cost_curve(lane.family, middle[lane.backend])
    bandwidth.append(measure_read_bandwidth(bandwidth_bytes))
    best = max(bandwidth, key=lambda b: b["gb_per_s"])
    return LaneRun(lanes, runs, notes, load_at_start, bandwidth, curves, [lane_figures(lane, best) for lane in lanes],
                   base, started)


def _where(lanes: Sequence[Lane], lane: Lane) -> str:
    """How progress names ``lane``: by its backend in a run on several, not at all in a run on one."""
    return f" [{lane.label}]" if len(lanes) > 1 else ""


def _measure(lanes: Sequence[Lane], runs: PromptRuns, base: DecodeParams, repeats: int, record_overhead_every: int,
             warm_up: bool, say: ProgressFn, notes: list[str], session: bool = False,
             seed: SuffixMemory | None = None) -> None:
    """Every lane warmed up (``warm_up``), then every prompt run on every lane, the lanes taking
    turns going first; each lane's samples appended to it. ``session`` (`decoders.bench.session`):
    the prompts in order as one session, every turn of a multi-turn question after the one
    before it, each row that drafts from a memory with its own (new at each repeat: empty, or a
    copy of ``seed``), and each
    sample numbered by its place in the session."""
    if warm_up:
        for lane in lanes:
            prompt, ids = shortest([(p, i[lane.backend]) for p, i in runs])
            say(f"warm-up on {prompt.name}{_where(lanes, lane)}")
            # in a session from a memory file, the warm-up drafts from a copy of it too (as the rows will)
            with memory_in_use(lane.family, seed.copy()) if session and seed is not None else nullcontext():
                warm_up_rows(lane.engine, lane.reference, prompt, ids, base, lane.rows)
    total = sum(len(session_turns(prompt)) if session else 1 for prompt, _ in runs) * repeats
    number = 0
    for repeat in range(repeats):
        memories = {lane.backend: SessionMemories(lane.family, seed) for lane in lanes} if session else {}
        position = 0
        for prompt, prompt_ids in runs:
            here: dict[str, tuple[BenchPrompt, list[int]]] = {lane.backend: (prompt, prompt_ids[lane.backend])
                                                              for lane in lanes}
            while here:
                number += 1
                order = lanes if number % 2 == 1 else lanes[::-1]  # who goes first alternates by prompt
                for lane in order:
                    turn, ids = here[lane.backend]
                    where = (head(number, total, turn) + _where(lanes, lane)
                             + (f" (repeat {repeat + 1}/{repeats})" if repeats > 1 else ""))

                    def tick(what: str, where: str = where) -> None:
                        say(f"{where}: {what}")

                    record_labels = [row.label for row in lane.rows] if record_overhead_every else []
                    measurer = PromptMeasurer(lane.family, lane.rows, base, record_labels, tick, lane.reference,
                                              lane.engine, warm=warm_up, memories=memories.get(lane.backend))
                    with_twins = bool(record_labels) and (number - 1) % record_overhead_every == 0
                    sample = measurer.measure(turn, ids, repeat, flip=lane.twins % 2 == 1, record_twins=with_twins)
                    if len(lanes) > 1:  # a run on one backend leaves it out, as before runs on several
                        sample.backend = lane.backend
                    if session:
                        sample.position = position
                    lane.samples.append(sample)
                    lane.twins += with_twins
                position += 1
                here = _next_turns(lanes, here, base, notes if repeat == 0 else []) if session else {}


def _next_turns(lanes: Sequence[Lane], here: dict[str, tuple[BenchPrompt, list[int]]], base: DecodeParams,
                notes: list[str]) -> dict[str, tuple[BenchPrompt, list[int]]]:
    """The next turn of each lane's question after its answer (the AR baseline's, as the assistant's
    message), with its ids; empty after the last turn, or where a lane's conversation no longer fits
    the model's context (noted)."""
    from decoders.core.errors import DecodeError

    after = {}
    for lane in lanes:
        turn, _ = here[lane.backend]
        answer = lane.family.answer_text(lane.samples[-1].ours[BASELINE].ids)
        following = turn.next_turn(answer)
        if following is None:
            return {}
        try:
            after[lane.backend] = (following, lane.engine.prompt_ids(following.text, base, following.history))
        except DecodeError as err:
            notes.append(f"{following.name} ({following.category}) skipped: {err}")
            return {}
    return after
