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

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from msgspec.structs import replace

from decoders.analysis.summary import first_divergence
from decoders.bench.aggregate import Figures, MethodStats
from decoders.bench.common import BACKEND_LABELS, BASELINE
from decoders.bench.inputs import ProgressFn, prompt_records
from decoders.bench.lanes import Lane, LaneRun, lane_settings, run_lanes
from decoders.bench.machine import BenchMachine, machine_info
from decoders.bench.prompts import BenchPrompt, group_rank
from decoders.bench.reference import Reference
from decoders.bench.settings import BenchSettings
from decoders.bench.suite import Agreement, BackendSide, BenchReport
from decoders.bench.targets import Target
from decoders.bench.variants import Variant
from decoders.core.errors import DecodeError

if TYPE_CHECKING:
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


def top2(family: Family, seq: list[int]) -> tuple[list[int], float]:
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
            entry = parted_at(entry, list(prompt_ids[sample.question_id][first.backend]), a, b, d,
                              [first.family, second.family])
        found.append(entry)
    return found


def parted_at(entry: Agreement, prompt: list[int], a: list[int], b: list[int], d: int,
              families: Sequence[Any]) -> Agreement:
    """``entry`` with what each side chose at ``d``, where outputs ``a`` and ``b`` part, and each
    family's top-2 logits after the prompt and the tokens they share (the first family's display)."""
    tops = [top2(family, prompt + a[:d]) for family in families]
    chosen = [a[d] if d < len(a) else None, b[d] if d < len(b) else None]
    return replace(entry, chosen=chosen, top2=[t[0] for t in tops], margin=[t[1] for t in tops],
                   chosen_text=[None if t is None else families[0].display(t) for t in chosen])


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


def _settings_of(lanes: Sequence[Lane], base, limit: int | None, repeats: int,
                 record_overhead_every: int) -> BenchSettings:
    each = [lane_settings(base, lane.rows, limit, repeats, lane.reference, record_overhead_every, lane.pairing)
            for lane in lanes]
    per_lane = list(zip(lanes, each, strict=True))
    # `lane_settings` names every reference's calls transformers_counterparts (the key predates other
    # references); here only transformers' stay under it, and counterparts holds every backend's
    return replace(
        each[0],
        methods=[lane.labelled(label) for lane, s in per_lane for label in s.methods],
        variants=[replace(v, label=lane.labelled(v.label), backend=lane.backend)
                  for lane, s in per_lane for v in s.rows],
        counterparts={lane.labelled(label): call for lane, s in per_lane
                      for label, call in s.transformers_counterparts.items()},
        transformers_counterparts={lane.labelled(label): call for lane, s in per_lane
                                   if lane.reference.name == "transformers"
                                   for label, call in s.transformers_counterparts.items()},
        pairing={lane.labelled(label): pairing for lane, s in per_lane for label, pairing in (s.pairing or {}).items()},
        backends=[lane.backend for lane in lanes],
        reference="several",
        references={lane.backend: lane.reference.name for lane in lanes},
    )


def run_backends(families: Mapping[str, Family], prompts: Sequence[BenchPrompt],
                 methods: Sequence[str] | str | None = None, max_new_tokens: int = 64, limit: int | None = None,
                 repeats: int = 1, progress: ProgressFn | None = None, *, params=None,
                 references: Mapping[str, Reference] | None = None, record_overhead_every: int = 3,
                 bandwidth_bytes: int = 1 << 30, warm_up: bool = True, variants: Sequence[Variant] | None = None,
                 early_exit_layer: int | None = None) -> BenchReport:
    """Every row on every prompt on each backend of ``families`` ({"torch": ..., "llamacpp": ...},
    the same model loaded by each), each beside its own reference; the report, rows labelled by
    backend. The arguments are `decoders.bench.suite.run_bench`'s; the run is one lane per backend
    (`decoders.bench.lanes.run_lanes`)."""
    if len(families) < 2:
        raise DecodeError("a run on several backends needs two or more; for one, use run_bench")
    run = run_lanes(families, prompts, methods, max_new_tokens, limit, repeats, progress, params=params,
                    references=references, record_overhead_every=record_overhead_every,
                    bandwidth_bytes=bandwidth_bytes, warm_up=warm_up, variants=variants,
                    early_exit_layer=early_exit_layer)
    if progress is not None:
        progress("comparing the backends' outputs")
    agreed = agreement(run.lanes, {prompt.question_id: ids for prompt, ids in run.runs})
    return _report(run, limit, repeats, record_overhead_every, agreed)


def _report(run: LaneRun, limit, repeats: int, record_overhead_every: int, agreed: list[Agreement]) -> BenchReport:
    """Every lane's figures under its backend's label, each backend's side, and the agreement."""
    lanes, base = run.lanes, run.base
    sides, targets = {}, []
    for lane, figs in zip(lanes, run.figures, strict=True):
        targets += _lane_targets(lane, figs.targets)
        sides[lane.backend] = BackendSide(
            backend=lane.backend, label=lane.label, family=figs.info, floor=figs.floor,
            verify_cost_curve=run.curves[lane.backend], reference=lane.reference.name,
            rows=[lane.labelled(label) for label in figs.labels],
            counterparts={lane.labelled(BASELINE): lane.reference.counterpart(BASELINE, base),
                          **{lane.labelled(row.label): row.counterpart for row in lane.rows}})
    merged = _merged(lanes, [figs.figures for figs in run.figures])
    first = sides[lanes[0].backend]
    from decoders.backends.llamacpp_model import version

    machine = BenchMachine.of(machine_info(), run.load_at_start, first.verify_cost_curve, llama_cpp_python=version())
    return BenchReport(
        family=first.family, machine=machine, settings=_settings_of(lanes, base, limit, repeats, record_overhead_every),
        prompts=prompt_records([(p, ids[lanes[0].backend]) for p, ids in run.runs]),
        bandwidth=run.bandwidth_record(), floor=first.floor,
        overall=merged.overall, groups=merged.groups, group_prompts=merged.group_prompts,
        samples=[s for lane in lanes for s in lane.samples], notes=run.notes, targets=targets,
        elapsed_s=run.elapsed_s(), backends=sides, agreement=agreed)
