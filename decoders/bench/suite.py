"""The benchmark: every method on every prompt, ours and transformers' interleaved, into a report.

* every row of ours is paired with its own autoregressive baseline as the app pairs a run
  (interleaved, step by step on a second cache: `decoders.bench.measure.bench_engine`), and each
  prompt is warmed up before any of it is timed (`decoders.engine.Engine.warm`), so that the
  bench, the sweep, ``tui-decode run`` and the app measure the same decode the same way;
* every output is compared with the autoregressive baseline and with transformers' output, and
  the first divergence is kept, never hidden;
* the memory-bandwidth floor (weight bytes / read bandwidth measured in the same run) says how
  far one decode step is from what the hardware allows.

Also what the suite and the sweep share: parameter checks, prompt preparation and warm-up choice
(both reports record every decoding parameter as ``settings["decode_params"]``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Sequence

import msgspec
from msgspec import UNSET, UnsetType

from decoders.bench.aggregate import Figures, MethodStats, aggregate
from decoders.bench.common import BASELINE
from decoders.bench.drafts import Drafts, Row, default_variants, resolve_rows
from decoders.bench.machine import (
    Floor,
    bandwidth_floor,
    busy_note,
    family_info,
    load_average,
    machine_info,
    measure_read_bandwidth,
    verify_cost_curve,
)
from decoders.bench.measure import AGAIN, PromptMeasurer, Sample, bench_engine, pairing_note, pairing_of
from decoders.bench.prompts import BenchPrompt, PromptRecord, select_prompts
from decoders.bench.reference import Reference, reference_for
from decoders.bench.targets import Target, evaluate_targets
from decoders.bench.variants import Variant
from decoders.core.declarations import get_method, method_names
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.records.codec import Record

if TYPE_CHECKING:
    from decoders.engine import Engine
    from decoders.models.family import Family

REPORT_SCHEMA = 1

ProgressFn = Callable[[str], None]
Prepared = list[tuple[BenchPrompt, list[int]]]


def parse_methods(text: str | Iterable[str] | None) -> tuple[str, ...]:
    """"ar,spec,pld" -> (BASELINE, "spec", "pld") in the registry's order; autoregressive always comes
    first (it is the baseline). None: every registered method."""
    known = method_names()
    if text is None:
        text = known
    names = [m.strip() for m in (text.split(",") if isinstance(text, str) else text) if m.strip()]
    if not names:
        raise DecodeError(f"no methods given; pass --methods as a comma-separated list of {', '.join(known)}")
    unknown = [m for m in names if m not in known]
    if unknown:
        raise DecodeError(f"unknown method {unknown[0]!r} in --methods; choose from {', '.join(known)}")
    return tuple([BASELINE] + [m for m in known if m in names and m != BASELINE])


# -- shared by the suite and the sweep ---------------------------------------------------------

def base_params(params: DecodeParams | None, max_new_tokens: int, repeats: int) -> DecodeParams:
    """The greedy, unrecorded parameters every run starts from; checks ``repeats`` too."""
    if not isinstance(repeats, int) or repeats < 1:
        raise DecodeError(f"repeats must be an integer >= 1, got {repeats!r}; set --repeats to 1 or more")
    base = (params or DecodeParams()).replace(max_new_tokens=max_new_tokens, mode="greedy", record=False)
    return base.replace(method=BASELINE).validated()


def prepare(family: Family, prompts: Sequence[BenchPrompt], limit: int | None, base: DecodeParams,
            notes: list[str]) -> Prepared:
    """Selected prompts with their token ids; prompts that do not fit the context are skipped."""
    from decoders.engine import Engine

    if limit is not None and limit < 1:
        raise DecodeError(f"limit must be an integer >= 1, got {limit}; set --limit to 1 or more")
    probe = Engine(family, pairing="sequential")
    runnable = []
    for prompt in select_prompts(prompts, limit):
        try:
            runnable.append((prompt, probe.prompt_ids(prompt.text, base)))
        except DecodeError as exc:
            notes.append(f"{prompt.name} ({prompt.category}) skipped: {exc}")
    if not runnable:
        raise DecodeError("none of the prompts fits the model's context with this token budget; "
                          "lower --max-new-tokens or use shorter prompts")
    return runnable


def shortest(runnable: Prepared) -> tuple[BenchPrompt, list[int]]:
    """The prompt to warm up on: the shortest one, so that warming up costs little."""
    return min(runnable, key=lambda item: len(item[1]))


def head(number: int, total: int, prompt: BenchPrompt) -> str:
    """The progress prefix of one prompt run: "[3/12] q81 writing"."""
    return f"[{number}/{total}] {prompt.name} {prompt.category}"


def prompt_records(runnable: Prepared) -> list[PromptRecord]:
    return [prompt.record(len(ids)) for prompt, ids in runnable]


def created() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


# -- the suite ---------------------------------------------------------------------------------

class BackendSide(Record, kw_only=True):
    """One backend of a run on several (`decoders.bench.multi`): what ran, its floor and T(k), its rows."""

    backend: str  # "torch", "llamacpp"
    label: str  # how row labels carry it: "torch", "llama.cpp"
    family: dict[str, Any]  # `family_info`: weight_bytes, backend class
    floor: Floor
    verify_cost_curve: dict[str, Any]
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
    family: dict[str, Any]
    machine: dict[str, Any]
    settings: dict[str, Any]
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


def _warm_up(engine: Engine, reference: Reference, prompt: BenchPrompt, ids: list[int], base: DecodeParams,
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


def _rows(family: Family, methods, variants, base: DecodeParams, reference: Reference,
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


def _settings(base: DecodeParams, rows: Sequence[Row], limit, repeats: int, reference: Reference,
              record_overhead_every: int, pairing: str = "sequential") -> dict[str, Any]:
    return {
        "reference": reference.name,
        "methods": [BASELINE] + [row.label for row in rows], "max_new_tokens": base.max_new_tokens, "limit": limit,
        "repeats": repeats, "chat_template": base.chat_template, "mode": "greedy",
        "decode_params": base.to_json(), "early_exit_layer": reference.early_exit_layer,
        "record_overhead_every": record_overhead_every,
        "variants": [row.to_json() for row in rows],
        "transformers_counterparts": {BASELINE: reference.counterpart(BASELINE, base),
                                      **{row.label: row.counterpart for row in rows}},
        # how each row of ours was paired with autoregressive decoding (`decoders.engine.PAIRINGS`)
        "pairing": {label: pairing for label in [BASELINE, AGAIN] + [row.label for row in rows]},
    }


def run_bench(family: Family, prompts: Sequence[BenchPrompt], methods: Sequence[str] | str | None = None,
              max_new_tokens: int = 64, limit: int | None = None, repeats: int = 1,
              progress: ProgressFn | None = None, *, params: DecodeParams | None = None,
              reference: Reference | None = None, record_overhead_every: int = 3,
              bandwidth_bytes: int = 1 << 30, warm_up: bool = True,
              variants: Sequence[Variant] | None = None, early_exit_layer: int | None = None) -> BenchReport:
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
    """
    started = time.perf_counter()
    say = progress or (lambda message: None)
    base = base_params(params, max_new_tokens, repeats)
    notes: list[str] = []
    from decoders.backends.fp16_cpu import Fp16LlamaBackend

    if isinstance(family.main, Fp16LlamaBackend):
        notes.append("float16 weights on CPU: transformers runs the float32 model, so \"matches tf\" also counts "
                     "outputs that part at near-ties; \"identical to AR\" is the float16 check")
    reference = reference or reference_for(family)
    if not isinstance(record_overhead_every, int) or record_overhead_every < 0:
        raise DecodeError(f"record_overhead_every must be an integer >= 0, got {record_overhead_every!r}")
    rows = _rows(family, methods, variants, base, reference, early_exit_layer, notes)
    runnable = prepare(family, prompts, limit, base, notes)
    record_labels = [row.label for row in rows] if record_overhead_every else []

    load_at_start = load_average()
    notes += filter(None, [busy_note(load_at_start)])
    say("measuring memory read bandwidth")
    bandwidth = [measure_read_bandwidth(bandwidth_bytes)]
    engine = bench_engine(family)
    notes += filter(None, [pairing_note(engine)])
    if warm_up:
        prompt, ids = shortest(runnable)
        say(f"warm-up on {prompt.name}")
        _warm_up(engine, reference, prompt, ids, base, rows)

    samples = []
    total = len(runnable) * repeats
    twins = 0
    for repeat in range(repeats):
        for index, (prompt, ids) in enumerate(runnable):
            number = repeat * len(runnable) + index + 1
            where = head(number, total, prompt) + (f" (repeat {repeat + 1}/{repeats})" if repeats > 1 else "")

            def tick(what: str, where: str = where) -> None:
                say(f"{where}: {what}")

            measurer = PromptMeasurer(family, rows, base, record_labels, tick, reference, engine, warm=warm_up)
            with_twins = bool(record_labels) and (number - 1) % record_overhead_every == 0
            samples.append(measurer.measure(prompt, ids, repeat, flip=twins % 2 == 1, record_twins=with_twins))
            twins += with_twins
    say("measuring the verify-cost curve T(k), k = 1..16")
    curve = verify_cost_curve(family, sorted((ids for _, ids in runnable), key=len)[len(runnable) // 2])
    bandwidth.append(measure_read_bandwidth(bandwidth_bytes))
    best = max(bandwidth, key=lambda b: b["gb_per_s"])

    labels = [BASELINE, AGAIN] + [row.label for row in rows]
    figures = aggregate(samples, labels)
    info = family_info(family)
    ar = figures.overall[BASELINE]
    floor = bandwidth_floor(best, info["weight_bytes"], ar.ours.ms_per_token, ar.ours.decode_step_ms,
                            ar.theirs.ms_per_token if ar.theirs else None)
    return BenchReport(
        family=info, machine={**machine_info(), "load_average_at_start": load_at_start, "verify_cost_curve": curve},
        settings=_settings(base, rows, limit, repeats, reference, record_overhead_every, pairing_of(engine)),
        prompts=prompt_records(runnable), bandwidth={"runs": bandwidth, "best_gb_per_s": best["gb_per_s"]},
        floor=floor, overall=figures.overall, groups=figures.groups, group_prompts=figures.group_prompts,
        samples=samples, notes=notes,
        targets=evaluate_targets(figures, {BASELINE: BASELINE, **{row.label: row.method for row in rows}}, samples,
                                 floor.floor_ms, reference.ar_goal),
        elapsed_s=round(time.perf_counter() - started, 1))
