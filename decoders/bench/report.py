"""The benchmark report as markdown (report.md) and JSON (report.json).

Rendering is kept apart from measuring so that a saved report.json can be re-rendered
(`load_report`), and so that the command line prints exactly the tables that report.md holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from decoders.analysis.summary import first_divergence
from decoders.bench.aggregate import MethodStats
from decoders.bench.batch import BatchReport
from decoders.bench.common import BASELINE, known, on_backend, split_backend
from decoders.bench.files import Report, report_from_json
from decoders.bench.files import load_report as load_report  # read here beside write_report
from decoders.bench.llamacpp_reference import LLAMACPP_REFERENCE
from decoders.bench.measure import AGAIN
from decoders.bench.prompts import group_label
from decoders.bench.suite import BenchReport
from decoders.bench.sweep import SweepReport
from decoders.bench.targets import is_tree
from decoders.core.declarations import Method, all_methods, get_method
from decoders.core.errors import DecodeError
from decoders.records.codec import json_text

DASH = "–"
NO_COUNTERPART = "no counterpart"


def _num(x: float | None, digits: int = 2, suffix: str = "") -> str:
    return DASH if x is None else f"{x:.{digits}f}{suffix}"


def _ms(x: float | None) -> str:
    """Milliseconds with enough digits to stay meaningful for tiny models too."""
    if x is None:
        return DASH
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def _count(part: int | None, whole: int | None) -> str:
    if part is None or whole is None:
        return DASH
    mark = "yes" if part == whole else "no"
    return f"{mark} ({part}/{whole})"


def _off(error: float | None) -> str:
    return DASH if error is None else f"{error:+.0%}"


def _method(name: str) -> str:
    """A row's label for a table: the method's label ("Speculative"), then what the variant
    changes ("Speculative [int4]"); the key itself when its method is not registered (a report
    saved by another version). A row of one backend of several keeps its backend: "Prompt lookup [llama.cpp]"."""
    plain, backend = split_backend(name)
    if backend is not None:
        return _method(plain) + name[len(plain):]
    method, bracket, rest = name.partition("[")
    try:
        label = get_method(method).label
    except DecodeError:
        return name
    return label + (f" [{rest}" if bracket else "")


def row_methods(report: BenchReport) -> dict[str, str]:
    """Each row's label and the method it runs (from the settings' variants; a report without
    them has one row per method, keyed by its name)."""
    rows = {label: split_backend(label)[0] for label in report.settings["methods"]}
    rows.update({v["label"]: v["method"] for v in report.settings.get("variants") or []})
    return rows


def _spread(speedup: float | None, spread: float | None) -> str:
    """"+/- 0.04", with "(no measurable difference)" when 1.00x lies inside it, for a method."""
    if spread is None:
        return DASH
    same = speedup is not None and abs(speedup - 1.0) <= spread
    return f"+/- {spread:.2f}" + (" (no measurable difference)" if same and speedup != 1.0 else "")


def _speedup_cell(speedup: float | None, spread: float | None, method: str, acceptance: float | None) -> str:
    """The speedup, flagged "(noise)" in the column itself when 1.00x lies inside its spread (and,
    for a drafting row that accepted nothing, said why: it cannot be faster but by chance)."""
    cell = _num(speedup, suffix="x")
    if speedup is None or spread is None or method == BASELINE or abs(speedup - 1.0) > spread:
        return cell
    return cell + (" (noise: nothing accepted)" if acceptance == 0 else " (noise)")


def _positions(rates: list[float] | None) -> str:
    """Per-position acceptance, first draft position first: "0.80 0.55 0.30"."""
    return DASH if not rates else " ".join(f"{x:.2f}" for x in rates)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


FIGURE_HEADER = ("method", "tau", "speedup", "spread", "acceptance", "mean acceptance length",
                 "per-position acceptance", "identical to AR", "ms/token",
                 "tf tau", "tf speedup", "tf ms/token", "matches tf", "ms/token ours/tf", "speedup ours/tf")


def ref_prefix(report: BenchReport) -> str:
    """How the columns of the other side are headed: "tf" (transformers), "lcpp" (llama-cpp-python's
    own loop), "ref" in a run of several backends (each row beside its own backend's reference)."""
    if report.sides:
        return "ref"
    return "lcpp" if report.settings.get("reference") == LLAMACPP_REFERENCE else "tf"


def figure_header(report: BenchReport) -> tuple[str, ...]:
    prefix = ref_prefix(report)
    return tuple(h.replace("tf", prefix) if h.startswith("tf ") or h.endswith("tf") else h for h in FIGURE_HEADER)


def _figure_cells(method: str, stats: MethodStats) -> list[str]:
    ours, theirs = stats.ours, stats.theirs
    return [
        _method(method),
        _num(ours.tau),
        _speedup_cell(ours.speedup, ours.speedup_spread, method, known(ours.acceptance)),
        _spread(ours.speedup, ours.speedup_spread),
        _num(known(ours.acceptance)),
        _num(known(ours.mean_acceptance_length)),
        _positions(known(ours.per_position_acceptance)),
        _count(ours.identical, ours.n),
        _num(ours.ms_per_token, 1),
        _num(theirs.tau if theirs else None),
        _num(theirs.speedup if theirs else None, suffix="x") if theirs or method == BASELINE else NO_COUNTERPART,
        _num(theirs.ms_per_token if theirs else None, 1),
        _count(ours.matches_transformers, ours.n) if theirs else DASH,
        _num(known(stats.ratio_ms_per_token)),
        _num(known(stats.ratio_speedup)),
    ]


def overall_table(report: BenchReport) -> str:
    """Every method over all prompts, ours beside transformers' (tf)."""
    return _table(figure_header(report), [_figure_cells(m, stats) for m, stats in report.overall.items()])


def group_table(report: BenchReport) -> str:
    """Every method per Spec-Bench task group."""
    rows = []
    for group, per in report.groups.items():
        label = f"{group_label(group)} ({report.group_prompts[group]})"
        rows += [[label] + _figure_cells(method, stats) for method, stats in per.items()]
    return _table(("task group (prompts)",) + figure_header(report), rows)


def targets_table(report: BenchReport) -> str:
    rows = [[t.target, t.goal, t.value, {True: "met", False: "**missed**", None: DASH}[t.met], t.margin, t.note or ""]
            for t in report.targets]
    return _table(("target", "goal", "measured", "result", "margin", "note"), rows)


def floor_section(report: BenchReport) -> str:
    f, runs = report.floor, report.bandwidth["runs"]
    speeds = ", ".join(f"{b['gb_per_s']:.1f}" for b in runs)
    return "\n".join([
        f"- read bandwidth measured in this run: {f.gb_per_s:.1f} GB/s (best of the runs at start and end: "
        f"{speeds} GB/s; sum of a {runs[0]['bytes'] / 1e9:.2f} GB float32 tensor)",
        f"- weights read per forward: {f.weight_bytes / 1e6:.1f} MB ({report.family['backend']})",
        f"- floor for one decode step: **{_ms(f.floor_ms)} ms**",
        f"- ours: {_ms(f.ours_ms_per_token)} ms/token = **{_num(f.ours_ms_per_token_x_floor)}x the floor** "
        f"(one-token decode step {_ms(f.ours_decode_step_ms)} ms = {_num(f.ours_decode_step_x_floor)}x; "
        "ms/token also carries the prefill)",
        f"- {_reference_call(report)}: {_ms(f.transformers_ms_per_token)} ms/token = "
        f"{_num(f.transformers_ms_per_token_x_floor)}x the floor",
        curve_line(report.machine.get("verify_cost_curve")),
    ])


def _reference_call(report: BenchReport) -> str:
    return "llama-cpp-python's own loop" if report.settings.get("reference") == LLAMACPP_REFERENCE else \
        "transformers generate()"


def backend_rows(report: BenchReport) -> list[str]:
    """The rows of a run on several backends without their backends, in the order they first come."""
    return list(dict.fromkeys(split_backend(label)[0] for label in report.overall))


def backends_table(report: BenchReport) -> str:
    """Every row on each backend side by side: ms/token, speedup over that backend's own AR, output
    against that AR, and the backend's reference (ref) beside it."""
    sides = list(report.sides.values())
    header = ["method"]
    for side in sides:
        header += [f"{side.label} ms/token", f"{side.label} speedup", f"{side.label} identical to AR",
                   f"{side.label} ref ms/token", f"{side.label} ref speedup", f"{side.label} ms/token ours/ref"]
    rows = []
    for plain in backend_rows(report):
        cells = [_method(plain)]
        for side in sides:
            stats = report.overall.get(on_backend(plain, side.backend))
            if stats is None:
                cells += [DASH] * 6
                continue
            ours, theirs = stats.ours, stats.theirs
            cells += [_num(ours.ms_per_token, 1), _speedup_cell(ours.speedup, ours.speedup_spread, plain,
                                                                known(ours.acceptance)),
                      _count(ours.identical, ours.n), _num(theirs.ms_per_token if theirs else None, 1),
                      _num(theirs.speedup if theirs else None, suffix="x") if theirs or plain == BASELINE
                      else NO_COUNTERPART, _num(known(stats.ratio_ms_per_token))]
        rows.append(cells)
    return _table(header, rows)


def backends_floor_section(report: BenchReport) -> str:
    """Each backend's bandwidth floor (the weights it reads per forward at the run's read bandwidth),
    its AR and its reference's against it, and its verify-cost curve."""
    sides = list(report.sides.values())
    header = ["backend", "weights read per forward", "floor", "AR ms/token", "x floor", "AR decode ms/token",
              "one-token step", "x floor", "reference", "ref AR ms/token", "ref decode ms/token", "AR ours/ref",
              "AR decode ours/ref"]
    rows = []
    for side in sides:
        f = side.floor
        stats = report.overall.get(on_backend(BASELINE, side.backend))
        ours_decode = theirs_decode = ratio = None
        if stats is not None:
            ours_decode = stats.ours.decode_ms_per_token
            theirs_decode = stats.theirs.decode_ms_per_token if stats.theirs else None
            ratio = known(stats.ratio_ms_per_token)
        stored = str(side.family.get("dtype")).removesuffix(" (llama.cpp)")
        rows.append([side.label, f"{f.weight_bytes / 1e6:.1f} MB ({stored})", f"{_ms(f.floor_ms)} ms",
                     _ms(f.ours_ms_per_token), _num(f.ours_ms_per_token_x_floor), _ms(ours_decode),
                     _ms(f.ours_decode_step_ms), _num(f.ours_decode_step_x_floor), side.reference,
                     _ms(f.transformers_ms_per_token), _ms(theirs_decode), _num(ratio),
                     _num(ours_decode / theirs_decode if ours_decode and theirs_decode else None)])
    speeds = ", ".join(f"{b['gb_per_s']:.1f}" for b in report.bandwidth["runs"])
    lines = [_table(header, rows), "",
             f"- read bandwidth measured in this run: {report.floor.gb_per_s:.1f} GB/s (best of {speeds} GB/s); "
             "floor: the weights one forward reads at that bandwidth",
             "- ms/token includes the prefill; decode ms/token is the time after the first token over the tokens "
             "after it (the loop alone); the one-token step is the engine's mean one-token forward"]
    for side in sides:
        lines.append(curve_line(side.verify_cost_curve).replace("- verify-cost curve", f"- {side.label}: verify-cost "
                                                                                         "curve", 1))
    return "\n".join(lines)


def agreement_table(report: BenchReport) -> str:
    """The backends' AR outputs on every prompt run: identical, or where they part and how near a tie it was."""
    labels = {side.backend: side.label for side in report.sides.values()}
    rows = []
    for a in report.agreements:
        first, second = (labels.get(b, b) for b in a.backends)
        name = f"q{a.question_id}" + (f" r{a.repeat + 1}" if report.settings["repeats"] > 1 else "")
        if a.identical:
            rows.append([name, a.category, f"{a.tokens[0]} / {a.tokens[1]}", "identical", DASH, DASH, DASH])
            continue
        shown = a.chosen_text or [None] * len(a.chosen)
        chosen = " / ".join(DASH if t is None else f"{t}" + (f" {text!r}" if text is not None else "")
                            for t, text in zip(a.chosen, shown, strict=False))
        tops = [f"{_num(m, 3)} ({' > '.join(map(str, t))})" if t else DASH
                for m, t in zip(a.margin, a.top2, strict=False)]
        runner_up = len(a.top2) > 0 and len(a.top2[0]) == 2 and len(a.chosen) == 2 and a.chosen[1] == a.top2[0][1]
        parts = f"parts at token {a.first_divergence}" + (f" ({second}'s token is {first}'s runner-up)"
                                                           if runner_up else "")
        rows.append([name, a.category, f"{a.tokens[0]} / {a.tokens[1]}", parts, chosen,
                     tops[0] if tops else DASH, tops[1] if len(tops) > 1 else DASH])
    if not report.agreements:
        return "(no prompt run on both backends)"
    first, second = (labels.get(b, b) for b in report.agreements[0].backends)
    same = sum(a.identical for a in report.agreements)
    table = _table(("prompt", "category", f"tokens {first} / {second}", "AR outputs", f"token there {first} / "
                    f"{second}", f"{first} top-2 margin (top-2)", f"{second} top-2 margin (top-2)"), rows)
    return (f"- identical on {same}/{len(report.agreements)} prompt runs; where they part, each side's top-1 minus "
            f"top-2 logit after the tokens they share (a small margin is a near-tie, which either side may break "
            f"the other way)\n\n" + table)


def curve_line(curve: dict[str, Any] | None) -> str:
    """The verify-cost curve T(k), k = 1..16, measured in the run (a saved report from before it: said so)."""
    if not curve or not curve.get("t"):
        return "- verify-cost curve T(k): not measured"
    values = " ".join(f"{t:.2f}" for t in curve["t"])
    return (f"- verify-cost curve T(k), k = 1..{len(curve['t'])} (a k-token forward over a one-token forward, "
            f"after {curve['context']} tokens): {values}")


def theorem_methods(report: BenchReport) -> list[Method]:
    """The methods of the run's rows that declare the ``theorem`` target, in the registry's order."""
    names = set(row_methods(report).values())
    return [m for m in all_methods() if m.name in names and "theorem" in {t.kind for t in m.bench_targets}]


def theorem_section(report: BenchReport, method: Method) -> str | None:
    """Every row of ``method`` against Theorem 3.8, overall and per group, transformers' beside it."""
    labels = [label for label, name in row_methods(report).items() if name == method.name and label in report.overall]
    if not labels:
        return None
    rows = []
    for label in labels:
        scopes = [("overall", report.overall[label])] + [
            (group_label(g), per[label]) for g, per in report.groups.items() if label in per]
        for scope, stats in scopes:
            s, theirs = stats.ours, stats.theirs
            measured, predicted, aware = s.speedup, known(s.predicted_speedup), known(s.predicted_speedup_cost_aware)
            if is_tree(label):  # the theorem's E[tokens] is a linear draft's
                predicted = aware = None
            rows.append([_method(label), scope, _num(measured, suffix="x"), _num(predicted, suffix="x"),
                         DASH if not (measured and predicted) else f"{measured / predicted - 1:+.0%}",
                         _num(aware, suffix="x"), DASH if not (measured and aware) else f"{measured / aware - 1:+.0%}",
                         _num(known(s.acceptance)), _num(known(s.alpha_hat)), _num(known(s.c_hat)), _num(s.verify_cost),
                         _num(s.tau), _count(s.identical, s.n),
                         _num(theirs.speedup, suffix="x") if theirs else NO_COUNTERPART])
    return _table(("row", "", "measured", "Thm 3.8", "off by", "cost-aware", "off by", "acceptance", "alpha_hat",
                   "c_hat", "verify cost", "tau", "identical to AR", "tf speedup"), rows)


def variants_section(report: BenchReport) -> str | None:
    """What each row that is a variant runs: its parameters, its draft and transformers' counterpart."""
    variants = [v for v in report.settings.get("variants") or [] if v.get("params") or v.get("draft")]
    if not variants:
        return None
    rows = [[v["label"], v["method"], ", ".join(f"{k}={x}" for k, x in v["params"].items()) or DASH,
             v.get("draft_source") or DASH,
             (f"`{v['transformers_counterpart']}`" + (" (closest)" if v.get("counterpart_is_closest") else ""))
             if v.get("transformers_counterpart") else NO_COUNTERPART] for v in variants]
    return _table(("variant", "method", "parameters", "draft", "transformers counterpart"), rows)


def record_section(report: BenchReport) -> str | None:
    rows = []
    for method, stats in report.overall.items():
        if stats.overhead is None:
            continue
        samples = [s for s in report.samples if method in s.record_on]
        off = sum(s.ours[method].wall_ms for s in samples)
        on = sum(s.record_on[method].wall_ms for s in samples)
        rows.append([_method(method), f"{off / 1000:.2f} s", f"{on / 1000:.2f} s",
                     f"{stats.overhead:+.1%}", str(len(samples))])
    if not rows:
        return None
    return _table(("method", "record=False", "record=True", "overhead", "runs"), rows)


def prompt_table(report: BenchReport) -> str:
    """Every prompt run: AR against the reference's, every row's speedup (a run on several backends:
    one line per prompt and backend, the rows without their backends)."""
    several = bool(report.sides)
    labels = backend_rows(report) if several else report.settings["methods"]
    methods = [m for m in labels if m != BASELINE and not (several and m == AGAIN)]
    ref = ref_prefix(report)
    header = ["prompt"] + (["backend"] if several else []) + ["group", "prompt tokens", "AR ms/token",
                                                              f"{ref} AR ms/token", f"AR = {ref}"]
    header += [f"{m} speedup ({ref})" for m in methods]
    shown = {side.backend: side.label for side in report.sides.values()}
    rows = []
    for s in report.samples:
        ours_ar, theirs_ar = s.ours[BASELINE], s.theirs[BASELINE]
        row = [f"q{s.question_id}" + (f" r{s.repeat + 1}" if report.settings["repeats"] > 1 else "")]
        backend = known(s.backend) or ""
        row += [shown.get(backend, backend)] if several else []
        row += [group_label(s.group), str(s.prompt_tokens), _num(ours_ar.ms_per_token, 1),
               _num(theirs_ar.ms_per_token, 1),
               "yes" if ours_ar.ids == theirs_ar.ids else f"no @{first_divergence(ours_ar.ids, theirs_ar.ids)}"]
        for m in methods:
            entry = s.ours.get(m)
            if entry is None:
                row.append(DASH)
                continue
            flag = "" if entry.identical in (None, True) else f" ≠AR@{entry.first_divergence}"
            their = s.theirs.get(m)
            row.append(f"{entry.speedup:.2f}x" + (f" ({their.speedup:.2f}x)" if their else "") + flag)
        rows.append(row)
    return _table(header, rows)


def _contention(mach: dict[str, Any]) -> str:
    loads = [load[0] for load in (mach.get("load_average_at_start"), mach.get("load_average")) if load]
    if loads and mach.get("cpus") and max(loads) > mach["cpus"]:
        return (f" (**above the {mach['cpus']} CPUs: other processes competed for them, so timings are noisier "
                "than on an idle machine**)")
    return ""


def _load(load: list[float] | None) -> str:
    return DASH if not load else f"{load[0]:.1f}"


def _every(k: int) -> str:
    return "every prompt" if k == 1 else f"every {({2: 'second', 3: 'third'}).get(k, f'{k}th')} prompt"


def params_line(report: BenchReport) -> str:
    """Each row's method's parameters as the flags set them (``decode_params``; a variant's own
    are in the Variants section), in the order the method declares them."""
    values, names = report.settings.get("decode_params") or {}, set(row_methods(report).values())
    parts = [f"{m.name} " + ", ".join(f"{s.name}={values[s.name]}" for s in m.params if s.name in values)
             for m in all_methods() if m.name in names and any(s.name in values for s in m.params)]
    return "- parameters: " + ("; ".join(parts) if parts else "none beyond the budget")


PAIRING_TEXT = {
    "interleaved": "interleaved: each with its own autoregressive baseline, decoded beside it step by step on a "
                   "second cache and timed in the same seconds, as the app runs",
    "sequential": "sequential: against the prompt's one autoregressive baseline, decoded before its rows",
}


def pairing_line(pairings: dict[str, str] | None, methods: Sequence[str]) -> str:
    """How each row was paired with autoregressive decoding (`decoders.engine.PAIRINGS`): one
    clause when every row was paired alike, else the rows of each pairing by name."""
    if not pairings:  # a report from before rows were paired: the bench paired sequentially then
        return "- pairing: sequential (every row against the prompt's one baseline; not recorded in this report)"
    by: dict[str, list[str]] = {}
    for label in [m for m in methods if m in pairings] + [m for m in pairings if m not in methods]:
        by.setdefault(pairings[label], []).append(label)
    if len(by) == 1:
        (pairing,) = by
        return f"- pairing: every row {PAIRING_TEXT.get(pairing, pairing)}; each prompt warmed up before it is timed"
    parts = [f"{', '.join(_method(m) for m in labels)} {PAIRING_TEXT.get(pairing, pairing)}"
             for pairing, labels in by.items()]
    return "- pairing: " + "; ".join(parts) + " (see the notes for why)"


def settings_lines(report: BenchReport) -> list[str]:
    st, fam, mach = report.settings, report.family, report.machine
    lines = [
        f"- model: {fam['label']} ({fam['main']}, {fam['dtype']} on {fam['device']}, backend {fam['backend']}); "
        f"helper: {fam['helper'] or 'none'}",
        f"- prompts: {len(report.prompts)} (first turn, chat template), {st['max_new_tokens']} new tokens, greedy, "
        f"{st['repeats']} repeat(s)",
        params_line(report),
        pairing_line(report.settings.get("pairing"), list(report.overall)),
        f"- machine: {mach['processor']}, {mach['cpus']} CPUs, {mach['torch_threads']} torch threads; "
        f"torch {mach['torch']}, transformers {mach['transformers']}; load average (1 min) "
        f"{_load(mach.get('load_average_at_start'))} at start, {_load(mach.get('load_average'))} at the end"
        + _contention(mach),
        f"- run took {report.elapsed_s:.0f} s, {report.created}",
    ]
    if mach.get("llama_cpp_python"):
        lines.append(f"- llama-cpp-python {mach['llama_cpp_python']}")
    if report.sides:
        for side in report.sides.values():
            calls = [f"{_method(m)}: `{c}`" for m, c in side.counterparts.items() if c]
            lines.append(f"- {side.label} rows: {side.family.get('backend')}, {side.family.get('dtype')}; "
                         f"reference (ref) {side.reference}" + (": " + "; ".join(calls) if calls else ""))
        return lines
    counterparts = [f"{_method(m)}: `{c}`" for m, c in st["transformers_counterparts"].items() if c]
    if counterparts:
        loop = st.get("reference") == LLAMACPP_REFERENCE
        name = "llama-cpp-python's own loop (lcpp)" if loop else "transformers (tf)"
        lines.append(f"- {name} counterparts: " + "; ".join(counterparts))
    return lines


def _notes(report: Report) -> list[str]:
    return ["## Notes", ""] + [f"- {note}" for note in report.notes] + [""] if report.notes else []


HOW_TO_READ = (
    "Speedups follow Spec-Bench: mean per-prompt tokens/s of a method over mean per-prompt tokens/s of "
    "autoregressive decoding (AR) on the same prompts, each side against its own AR (ours against our AR, "
    "transformers' against `generate()`). tau is tokens per target forward, pooled over all iterations; "
    "acceptance is accepted drafts over drafts the target judged. Mean acceptance length and per-position "
    "acceptance are vLLM's: 1 + accepted drafts per iteration that drafted (the tokens one verify forward "
    "yields), and for draft positions 1, 2, ... the share of those iterations whose token there was accepted. "
    "ms/token includes the prefill. "
    "spread is two standard errors of the speedup: the spread of the per-prompt speedups and the timing noise "
    "measured on each prompt (interleaved: the pair's own spread, from the step-to-step jitter and the two "
    "prefills; sequential: the one-token step timed right after the run against the AR baseline's own steps) "
    "together; the AR row is 1.00x by definition. Every row is over its own baseline where it was paired "
    "interleaved (see pairing above); each prompt is warmed up, untimed, before any of it is timed. The "
    "Autoregressive [again] row is autoregressive decoding against its own baseline, last on each prompt: the "
    "same decode on both sides of the pairing, so its distance from 1.00x and its spread are the noise any "
    "other row carries too. "
    "A speedup whose spread reaches 1.00x is no measurable difference. "
    "\"identical to AR\" counts outputs equal to the same side's greedy baseline; \"matches tf\" counts our "
    "outputs equal to transformers' output for the same method. No baseline is reused from one prompt or row "
    "to the next, and runs alternate ours / transformers / ours."
)


SEVERAL_BACKENDS = (
    "The same model file ran on several backends in this run, prompt by prompt, the backends taking turns "
    "going first. Row labels carry the backend (\"Autoregressive [llama.cpp]\"); every speedup is over that "
    "backend's own AR on the same prompts, and \"ref\" is that backend's reference: transformers' "
    "`generate()` on the same torch weights for the torch rows, llama-cpp-python's own loop (`Llama.generate`, "
    "greedy) on the same GGUF file for the llama.cpp rows. ms/token of the backends compare directly: the "
    "same prompts, tokens and threads."
)


def render_markdown(report: Report | dict[str, Any]) -> str:
    """The whole report.md, from a report or a saved report.json's contents."""
    if isinstance(report, dict):
        report = report_from_json(report)
    if isinstance(report, SweepReport):
        return render_sweep_markdown(report)
    if isinstance(report, BatchReport):
        from decoders.bench.batch import render_markdown as render_batch

        return render_batch(report)
    parts = ["# tui-decode bench", "", *settings_lines(report), "", HOW_TO_READ, ""]
    if ref_prefix(report) == "lcpp":
        parts += ["On the llama.cpp backend the other side is llama-cpp-python's own loop (`Llama.generate`, greedy) "
                  "on the same GGUF file, in the columns headed lcpp, where the text above says transformers.", ""]
    if report.sides:
        parts += [SEVERAL_BACKENDS, "", "## Backends side by side", "", backends_table(report), "",
                  "## Memory-bandwidth floor and verify-cost curve of each backend", "",
                  backends_floor_section(report), "",
                  "## Agreement between the backends' AR outputs", "", agreement_table(report), ""]
    parts += ["## Overall", "", overall_table(report), "",
              "## Per task group", "", group_table(report), "",
              "## Targets", "", targets_table(report), ""]
    if not report.sides:
        parts += ["## Memory-bandwidth floor", "", floor_section(report), ""]
    variants = variants_section(report)
    if variants:
        parts += ["## Variants", "", "Rows that run a method with other parameters or another draft than the flags "
                  "set; each is checked against AR on every prompt on its own.", "", variants, ""]
    for method in theorem_methods(report):
        section = theorem_section(report, method)
        if section:
            parts += [f"## {method.label} decoding against Theorem 3.8", "",
                      "Theorem 3.8 (Leviathan et al. 2023) predicts E[tokens per iteration] / (gamma * c + 1) from "
                      "the run's own alpha_hat and c_hat; it assumes a (gamma+1)-token verify costs one one-token "
                      "forward. The cost-aware form puts the measured verify cost in place of that 1. A draft tree "
                      "is not one linear draft, so tree rows show no prediction; compare their tau with the linear "
                      "rows'.", "", section, ""]
    record = record_section(report)
    if record:
        parts += ["## Recording overhead", "",
                  "The same decoder with `record=True` (probabilities and top-5 per draft position kept) against "
                  f"`record=False`, run back to back on {_every(report.settings['record_overhead_every'])}, "
                  "which of the two goes first alternating.", "", record, ""]
    theirs = ("the reference's over its own AR" if ref_prefix(report) != "tf"
              else "transformers' over its generate()")
    parts += ["## Per prompt", "", f"Speedup of ours over our AR; {theirs} in brackets; "
              "≠AR@i marks an output that left the baseline at token i.", "", prompt_table(report), ""]
    return "\n".join(parts + _notes(report))


def sweep_table(report: SweepReport) -> str:
    rows = [[str(r.value), _num(r.measured_speedup, suffix="x"), _num(r.predicted_speedup, suffix="x"),
             _off(r.error), _num(r.predicted_cost_aware, suffix="x"), _off(r.error_cost_aware), _num(r.tau),
             _num(r.acceptance), _num(r.mean_acceptance_length), _positions(r.per_position_acceptance),
             _num(r.ms_per_token, 1), _count(r.identical, r.n)] for r in report.rows]
    return _table((report.sweep.axis, "measured speedup", "Thm 3.8", "off by", "cost-aware", "off by", "tau",
                   "acceptance", "mean acceptance length", "per-position acceptance", "ms/token",
                   "identical to AR"), rows)


def sweep_pairing_line(pairing: str | None) -> str:
    """How each value's run was paired with autoregressive decoding (a report from before: sequential)."""
    if pairing is None:
        return "- pairing: sequential (every value against the prompt's one baseline; not recorded in this report)"
    return f"- pairing: every value {PAIRING_TEXT.get(pairing, pairing)}; each prompt warmed up before it is timed"


def render_sweep_markdown(report: SweepReport) -> str:
    sw, st, fam = report.sweep, report.settings, report.family
    lines = [f"# tui-decode bench: sweep of {sw.heading()}", "",
             f"- model: {fam['label']} ({fam['backend']}); helper: {fam['helper'] or 'none'}",
             f"- prompts: {len(report.prompts)}, {st['max_new_tokens']} new tokens, greedy, {st['repeats']} "
             f"repeat(s); our AR: {_num(report.ar_ms_per_token, 1)} ms/token",
             sweep_pairing_line(st.get("pairing")),
             f"- run took {report.elapsed_s:.0f} s, {report.created}", "",
             "Measured: mean tokens/s over mean AR tokens/s (Spec-Bench). Theorem 3.8: E[tokens] / (value * c + 1) "
             "from each run's own acceptance (alpha_hat for speculative decoding) and draft cost c (0 for prompt "
             "lookup and Jacobi, whose drafts need no model forward); the cost-aware form uses the measured "
             "verify cost. The theorem assumes every iteration drafts `value` tokens, which prompt lookup does "
             "only when its n-gram matches.", "",
             sweep_table(report), "", f"Fastest measured: {sw.axis}={report.best_value}.", ""]
    return "\n".join(lines + _notes(report))


def write_report(report: Report, out_dir: str | Path) -> tuple[Path, Path]:
    """Write report.md and report.json into ``out_dir`` (created if needed)."""
    from decoders.records import atomic

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DecodeError(f"cannot write the report into {out}: {exc.strerror or exc}; "
                          "give a writable folder to --out") from None
    md, js = out / "report.md", out / "report.json"
    # Each file is written atomically: a failure (a full disk) leaves the earlier report as it was.
    atomic.write_text(md, render_markdown(report), what="the report")
    atomic.write_text(js, json_text(report.to_json(), ensure_ascii=False, indent=1), what="the report")
    return md, js
