"""The same model on several backends in one run (`tui-decode bench --backends torch,llamacpp`).

One GGUF file, loaded once per backend (torch dequantises it to float32; llama.cpp runs it as
stored), every row measured on each, each backend beside its own reference: transformers'
``generate()`` on the torch backend (`decoders.bench.reference`), llama-cpp-python's own greedy
loop on the llama.cpp backend (`decoders.bench.llamacpp_reference`).

Fair to both sides in the way the one-backend bench is fair to ours and transformers':

* prompt by prompt, the backends take turns going first (torch, llama.cpp on odd prompts;
  llama.cpp, torch on even ones), so that load from other processes hits them alike;
* every row's speedup is over its own backend's AR on the same prompt (its own baseline, decoded
  beside it, where the backend can make a twin of its model: the settings say each row's pairing),
  its spread from its own timing noise; ms/token of the two backends are comparable directly (same prompts, same tokens
  allowed, same threads);
* each backend gets its own bandwidth floor (the weights it reads per forward: 98 MB of Q4_1 for
  llama.cpp against 538 MB of float32 for torch, at the one read bandwidth measured in the run)
  and its own verify-cost curve T(k), k = 1..16, after the same context;
* the two backends' AR outputs are compared token by token on every prompt run (`Agreement`):
  identical, or the first position where they part with each side's top-2 logit margin there, so
  that a near-tie that broke the other way reads as one.

Row labels carry the backend ("ar [torch]", "pld [llama.cpp]", `decoders.bench.common.on_backend`);
each backend's figures, floor and curve are in the report's ``backends``, the agreement in
``agreement``; the report's ``family`` and ``floor`` are the first backend's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from msgspec.structs import replace

from decoders.analysis.summary import first_divergence
from decoders.bench.aggregate import Figures, MethodStats, aggregate
from decoders.bench.common import BACKEND_LABELS, BASELINE, on_backend
from decoders.bench.drafts import Row
from decoders.bench.machine import (
    bandwidth_floor,
    busy_note,
    family_info,
    load_average,
    machine_info,
    measure_read_bandwidth,
    verify_cost_curve,
)
from decoders.bench.measure import AGAIN, PromptMeasurer, Sample, bench_engine, pairing_note, pairing_of
from decoders.bench.prompts import BenchPrompt, group_rank
from decoders.bench.reference import Reference, reference_for
from decoders.bench.suite import (
    Agreement,
    BackendSide,
    BenchReport,
    Prepared,
    ProgressFn,
    _rows,
    _settings,
    _warm_up,
    base_params,
    head,
    prepare,
    prompt_records,
    shortest,
)
from decoders.bench.targets import Target, evaluate_targets
from decoders.bench.variants import Variant
from decoders.core.errors import DecodeError

if TYPE_CHECKING:
    from decoders.engine import Engine
    from decoders.models.family import Family

#: The backends a run may name, in the order `--backends` lists them in help.
BACKENDS = tuple(BACKEND_LABELS)


def parse_backends(text: str) -> tuple[str, ...]:
    """"torch,llamacpp" -> ("torch", "llamacpp"): two or more known backends, each once."""
    names = [name.strip() for name in text.split(",")]
    if "" in names:  # "torch,,llamacpp" or a trailing comma: a typo, not a list
        raise DecodeError(f"--backends {text[:80]!r} has an empty item; give names between the commas, e.g. "
                          "--backends torch,llamacpp")
    unknown = [name for name in names if name not in BACKENDS]
    if unknown:
        raise DecodeError(f"unknown backend {unknown[0][:40]!r} in --backends; choose from {', '.join(BACKENDS)}")
    if len(set(names)) != len(names):
        raise DecodeError("a backend is named twice in --backends; give each once, e.g. --backends torch,llamacpp")
    if len(names) < 2:
        raise DecodeError("--backends compares two or more backends, e.g. --backends torch,llamacpp; for one, "
                          "use --backend NAME")
    return tuple(names)


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
    def pairing(self) -> str:
        return pairing_of(self.engine)

    @property
    def label(self) -> str:
        return BACKEND_LABELS.get(self.backend, self.backend)

    def labelled(self, label: str) -> str:
        return on_backend(label, self.backend)


def _prompt_runs(lanes: Sequence[Lane], notes: list[str]) -> list[tuple[BenchPrompt, dict[str, list[int]]]]:
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


def _top2(family: Family, seq: list[int]) -> tuple[list[int], float]:
    """The two best next tokens of ``family``'s main model after ``seq``, and their logit margin."""
    from decoders.backends.runner import KVRunner

    runner = KVRunner(family.main)
    try:
        logits = runner.run(seq)[-1].float()
    finally:
        runner.reset()
    values, ids = logits.topk(2)
    return [int(i) for i in ids.tolist()], round(float(values[0] - values[1]), 4)


def agreement(lanes: Sequence[Lane], prompt_ids: Mapping[Any, dict[str, list[int]]]) -> list[Agreement]:
    """The first two backends' AR outputs on every prompt run, compared token by token; where they
    part, each side's top-2 logits after the prefix they share (the first side's prompt ids)."""
    first, second = lanes[0], lanes[1]
    theirs = {(s.question_id, s.repeat): s for s in second.samples}
    found = []
    for sample in first.samples:
        other = theirs.get((sample.question_id, sample.repeat))
        if other is None:
            continue
        a, b = sample.ours[BASELINE].ids, other.ours[BASELINE].ids
        d = first_divergence(a, b)
        entry = Agreement(question_id=sample.question_id, category=sample.category, repeat=sample.repeat,
                          backends=[first.backend, second.backend], tokens=[len(a), len(b)], identical=d is None,
                          first_divergence=d)
        if d is not None:
            seq = list(prompt_ids[sample.question_id][first.backend]) + a[:d]
            tops = [_top2(lane.family, seq) for lane in (first, second)]
            chosen = [a[d] if d < len(a) else None, b[d] if d < len(b) else None]
            entry = replace(entry, chosen=chosen, top2=[t[0] for t in tops], margin=[t[1] for t in tops],
                            chosen_text=[None if t is None else first.family.display(t) for t in chosen])
        found.append(entry)
    return found


def _merged(lanes: Sequence[Lane], figures: Sequence[Figures]) -> Figures:
    """Every backend's figures under its rows' labels, backend by backend (each AR first)."""
    overall: dict[str, MethodStats] = {}
    groups: dict[str, dict[str, MethodStats]] = {}
    for lane, figs in zip(lanes, figures, strict=True):
        overall.update({lane.labelled(label): stats for label, stats in figs.overall.items()})
        for group, per in figs.groups.items():
            groups.setdefault(group, {}).update({lane.labelled(label): stats for label, stats in per.items()})
    ordered = {g: groups[g] for g in sorted(groups, key=group_rank)}
    return Figures(overall, ordered, figures[0].group_prompts)


def _lane_targets(lane: Lane, targets: Sequence[Target]) -> list[Target]:
    return [replace(t, key=f"{t.key} [{lane.label}]", target=f"[{lane.label}] {t.target}") for t in targets]


def _settings_of(lanes: Sequence[Lane], base, limit, repeats: int, record_overhead_every: int) -> dict[str, Any]:
    each = [_settings(base, lane.rows, limit, repeats, lane.reference, record_overhead_every, lane.pairing)
            for lane in lanes]
    settings = dict(each[0])
    settings["methods"] = [lane.labelled(label) for lane, s in zip(lanes, each, strict=True) for label in s["methods"]]
    settings["variants"] = [{**v, "label": lane.labelled(v["label"]), "backend": lane.backend}
                            for lane, s in zip(lanes, each, strict=True) for v in s["variants"]]
    # `_settings` names every reference's calls so (the key predates other references); here only
    # transformers' stay under it, and "counterparts" holds every backend's
    settings["counterparts"] = {lane.labelled(label): call for lane, s in zip(lanes, each, strict=True)
                                for label, call in s["transformers_counterparts"].items()}
    settings["transformers_counterparts"] = {
        lane.labelled(label): call for lane, s in zip(lanes, each, strict=True)
        if lane.reference.name == "transformers" for label, call in s["transformers_counterparts"].items()}
    settings["pairing"] = {lane.labelled(label): pairing for lane, s in zip(lanes, each, strict=True)
                           for label, pairing in s["pairing"].items()}
    settings["backends"] = [lane.backend for lane in lanes]
    settings["reference"] = "several"
    settings["references"] = {lane.backend: lane.reference.name for lane in lanes}
    return settings


def run_backends(families: Mapping[str, Family], prompts: Sequence[BenchPrompt],
                 methods: Sequence[str] | str | None = None, max_new_tokens: int = 64, limit: int | None = None,
                 repeats: int = 1, progress: ProgressFn | None = None, *, params=None,
                 references: Mapping[str, Reference] | None = None, record_overhead_every: int = 3,
                 bandwidth_bytes: int = 1 << 30, warm_up: bool = True, variants: Sequence[Variant] | None = None,
                 early_exit_layer: int | None = None) -> BenchReport:
    """Every row on every prompt on each backend of ``families`` ({"torch": ..., "llamacpp": ...},
    the same model loaded by each), each beside its own reference; the report, rows labelled by
    backend. The arguments are `decoders.bench.suite.run_bench`'s."""
    if len(families) < 2:
        raise DecodeError("a run on several backends needs two or more; for one, use run_bench")
    started = time.perf_counter()
    say = progress or (lambda message: None)
    base = base_params(params, max_new_tokens, repeats)
    if not isinstance(record_overhead_every, int) or record_overhead_every < 0:
        raise DecodeError(f"record_overhead_every must be an integer >= 0, got {record_overhead_every!r}")
    notes: list[str] = []
    lanes = []
    for backend, family in families.items():
        reference = (references or {}).get(backend) or reference_for(family)
        own: list[str] = []
        rows = _rows(family, methods, variants, base, reference, early_exit_layer, own)
        runnable = prepare(family, prompts, limit, base, own)
        notes += [f"[{BACKEND_LABELS.get(backend, backend)}] {note}" for note in own]
        lanes.append(Lane(backend, family, reference, rows, runnable, bench_engine(family)))
    runs = _prompt_runs(lanes, notes)
    ids_of = {prompt.question_id: ids for prompt, ids in runs}

    load_at_start = load_average()
    notes += filter(None, [busy_note(load_at_start)])
    say("measuring memory read bandwidth")
    bandwidth = [measure_read_bandwidth(bandwidth_bytes)]
    for lane in lanes:
        notes += [f"[{lane.label}] {note}" for note in filter(None, [pairing_note(lane.engine)])]
    if warm_up:
        for lane in lanes:
            prompt, ids = shortest([(p, i[lane.backend]) for p, i in runs])
            say(f"warm-up on {prompt.name} [{lane.label}]")
            _warm_up(lane.engine, lane.reference, prompt, ids, base, lane.rows)

    total = len(runs) * repeats
    for repeat in range(repeats):
        for index, (prompt, prompt_ids) in enumerate(runs):
            number = repeat * len(runs) + index + 1
            order = lanes if number % 2 == 1 else lanes[::-1]  # who goes first alternates by prompt
            for lane in order:
                where = (head(number, total, prompt) + f" [{lane.label}]"
                         + (f" (repeat {repeat + 1}/{repeats})" if repeats > 1 else ""))

                def tick(what: str, where: str = where) -> None:
                    say(f"{where}: {what}")

                record_labels = [row.label for row in lane.rows] if record_overhead_every else []
                measurer = PromptMeasurer(lane.family, lane.rows, base, record_labels, tick, lane.reference,
                                          lane.engine, warm=warm_up)
                with_twins = bool(record_labels) and (number - 1) % record_overhead_every == 0
                sample = measurer.measure(prompt, prompt_ids[lane.backend], repeat, flip=lane.twins % 2 == 1,
                                          record_twins=with_twins)
                sample.backend = lane.backend
                lane.samples.append(sample)
                lane.twins += with_twins
    middle = sorted(runs, key=lambda run: len(run[1][lanes[0].backend]))[len(runs) // 2][1]
    curves = {}
    for lane in lanes:
        say(f"measuring the verify-cost curve T(k), k = 1..16 [{lane.label}]")
        curves[lane.backend] = verify_cost_curve(lane.family, middle[lane.backend])
    say("comparing the backends' outputs")
    agreed = agreement(lanes, ids_of)
    bandwidth.append(measure_read_bandwidth(bandwidth_bytes))
    best = max(bandwidth, key=lambda b: b["gb_per_s"])

    figures, sides, targets = [], {}, []
    for lane in lanes:
        labels = [BASELINE, AGAIN] + [row.label for row in lane.rows]
        figs = aggregate(lane.samples, labels)
        figures.append(figs)
        info = family_info(lane.family)
        ar = figs.overall[BASELINE]
        floor = bandwidth_floor(best, info["weight_bytes"], ar.ours.ms_per_token, ar.ours.decode_step_ms,
                                ar.theirs.ms_per_token if ar.theirs else None)
        methods_of = {BASELINE: BASELINE, **{row.label: row.method for row in lane.rows}}
        targets += _lane_targets(lane, evaluate_targets(figs, methods_of, lane.samples, floor.floor_ms,
                                                        lane.reference.ar_goal))
        sides[lane.backend] = BackendSide(
            backend=lane.backend, label=lane.label, family=info, floor=floor, verify_cost_curve=curves[lane.backend],
            reference=lane.reference.name, rows=[lane.labelled(label) for label in labels],
            counterparts={lane.labelled(BASELINE): lane.reference.counterpart(BASELINE, base),
                          **{lane.labelled(row.label): row.counterpart for row in lane.rows}})
    merged = _merged(lanes, figures)
    first = sides[lanes[0].backend]
    from decoders.backends.llamacpp import version

    machine = {**machine_info(), "load_average_at_start": load_at_start, "verify_cost_curve": first.verify_cost_curve,
               "llama_cpp_python": version()}
    return BenchReport(
        family=first.family, machine=machine, settings=_settings_of(lanes, base, limit, repeats, record_overhead_every),
        prompts=prompt_records([(p, ids[lanes[0].backend]) for p, ids in runs]),
        bandwidth={"runs": bandwidth, "best_gb_per_s": best["gb_per_s"]}, floor=first.floor,
        overall=merged.overall, groups=merged.groups, group_prompts=merged.group_prompts,
        samples=[s for lane in lanes for s in lane.samples], notes=notes, targets=targets,
        elapsed_s=round(time.perf_counter() - started, 1), backends=sides, agreement=agreed)
