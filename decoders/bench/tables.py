"""The bench report's tables and sections (report.md and the command line print the same): every
row overall and per task group, the targets, the bandwidth floor, a run on several backends side by
side with the agreement of their outputs, Theorem 3.8, the variants, the recording overhead and
every prompt. Each cell as `decoders.bench.cells` writes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from decoders.analysis.summary import first_divergence
from decoders.bench.aggregate import MethodStats
from decoders.bench.cells import (
    DASH,
    NO_COUNTERPART,
    count_text,
    figure_cells,
    figure_header,
    md_table,
    method_label,
    ms_text,
    num,
    ref_prefix,
    row_methods,
    speedup_cell,
)
from decoders.bench.common import BASELINE, known, on_backend, split_backend
from decoders.bench.llamacpp_reference import LLAMACPP_REFERENCE
from decoders.bench.machine import CostCurve
from decoders.bench.measure import AGAIN
from decoders.bench.prompts import group_label
from decoders.bench.suite import Agreement, BenchReport
from decoders.bench.targets import is_tree
from decoders.core.declarations import Method, all_methods


def overall_table(report: BenchReport) -> str:
    """Every method over all prompts, ours beside transformers' (tf)."""
    return md_table(figure_header(report), [figure_cells(m, stats) for m, stats in report.overall.items()])


def group_table(report: BenchReport) -> str:
    """Every method per Spec-Bench task group."""
    rows = []
    for group, per in report.groups.items():
        label = f"{group_label(group)} ({report.group_prompts[group]})"
        rows += [[label] + figure_cells(method, stats) for method, stats in per.items()]
    return md_table(("task group (prompts)",) + figure_header(report), rows)


def targets_table(report: BenchReport) -> str:
    rows = [[t.target, t.goal, t.value, {True: "met", False: "**missed**", None: DASH}[t.met], t.margin, t.note or ""]
            for t in report.targets]
    return md_table(("target", "goal", "measured", "result", "margin", "note"), rows)


def floor_section(report: BenchReport) -> str:
    f, runs = report.floor, report.bandwidth["runs"]
    speeds = ", ".join(f"{b['gb_per_s']:.1f}" for b in runs)
    return "\n".join([
        f"- read bandwidth measured in this run: {f.gb_per_s:.1f} GB/s (best of the runs at start and end: "
        f"{speeds} GB/s; sum of a {runs[0]['bytes'] / 1e9:.2f} GB float32 tensor)",
        f"- weights read per forward: {f.weight_bytes / 1e6:.1f} MB ({report.family.backend})",
        f"- floor for one decode step: **{ms_text(f.floor_ms)} ms**",
        f"- ours: {ms_text(f.ours_ms_per_token)} ms/token = **{num(f.ours_ms_per_token_x_floor)}x the floor** "
        f"(one-token decode step {ms_text(f.ours_decode_step_ms)} ms = {num(f.ours_decode_step_x_floor)}x; "
        "ms/token also carries the prefill)",
        f"- {_reference_call(report)}: {ms_text(f.transformers_ms_per_token)} ms/token = "
        f"{num(f.transformers_ms_per_token_x_floor)}x the floor",
        curve_line(known(report.machine.verify_cost_curve)),
    ])


def _reference_call(report: BenchReport) -> str:
    return "llama-cpp-python's own loop" if report.settings.reference == LLAMACPP_REFERENCE else \
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
        cells = [method_label(plain)]
        for side in sides:
            stats = report.overall.get(on_backend(plain, side.backend))
            if stats is None:
                cells += [DASH] * 6
                continue
            ours, theirs = stats.ours, stats.theirs
            cells += [num(ours.ms_per_token, 1), speedup_cell(ours.speedup, ours.speedup_spread, plain,
                                                              known(ours.acceptance)),
                      count_text(ours.identical, ours.n), num(theirs.ms_per_token if theirs else None, 1),
                      num(theirs.speedup if theirs else None, suffix="x") if theirs or plain == BASELINE
                      else NO_COUNTERPART, num(known(stats.ratio_ms_per_token))]
        rows.append(cells)
    return md_table(header, rows)


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
        stored = str(side.family.dtype or None).removesuffix(" (llama.cpp)")
        rows.append([side.label, f"{f.weight_bytes / 1e6:.1f} MB ({stored})", f"{ms_text(f.floor_ms)} ms",
                     ms_text(f.ours_ms_per_token), num(f.ours_ms_per_token_x_floor), ms_text(ours_decode),
                     ms_text(f.ours_decode_step_ms), num(f.ours_decode_step_x_floor), side.reference,
                     ms_text(f.transformers_ms_per_token), ms_text(theirs_decode), num(ratio),
                     num(ours_decode / theirs_decode if ours_decode and theirs_decode else None)])
    speeds = ", ".join(f"{b['gb_per_s']:.1f}" for b in report.bandwidth["runs"])
    lines = [md_table(header, rows), "",
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
    return agreements_table(report.agreements, {side.backend: side.label for side in report.sides.values()},
                            report.settings.repeats > 1)


def agreements_table(agreements: Sequence[Agreement], labels: dict[str, str], repeated: bool = False) -> str:
    """Two backends' AR outputs on every prompt run (``labels``: each backend as shown; ``repeated``:
    name each run's repeat): identical, or where they part and how near a tie it was."""
    rows = []
    for a in agreements:
        first, second = (labels.get(b, b) for b in a.backends)
        name = f"q{a.question_id}" + (f" r{a.repeat + 1}" if repeated else "")
        if a.identical:
            rows.append([name, a.category, f"{a.tokens[0]} / {a.tokens[1]}", "identical", DASH, DASH, DASH])
            continue
        shown = a.chosen_text or [None] * len(a.chosen)
        chosen = " / ".join(DASH if t is None else f"{t}" + (f" {text!r}" if text is not None else "")
                            for t, text in zip(a.chosen, shown, strict=False))
        tops = [f"{num(m, 3)} ({' > '.join(map(str, t))})" if t else DASH
                for m, t in zip(a.margin, a.top2, strict=False)]
        runner_up = len(a.top2) > 0 and len(a.top2[0]) == 2 and len(a.chosen) == 2 and a.chosen[1] == a.top2[0][1]
        parts = f"parts at token {a.first_divergence}" + (f" ({second}'s token is {first}'s runner-up)"
                                                           if runner_up else "")
        rows.append([name, a.category, f"{a.tokens[0]} / {a.tokens[1]}", parts, chosen,
                     tops[0] if tops else DASH, tops[1] if len(tops) > 1 else DASH])
    if not agreements:
        return "(no prompt run on both backends)"
    first, second = (labels.get(b, b) for b in agreements[0].backends)
    same = sum(a.identical for a in agreements)
    table = md_table(("prompt", "category", f"tokens {first} / {second}", "AR outputs", f"token there {first} / "
                      f"{second}", f"{first} top-2 margin (top-2)", f"{second} top-2 margin (top-2)"), rows)
    return (f"- identical on {same}/{len(agreements)} prompt runs; where they part, each side's top-1 minus "
            f"top-2 logit after the tokens they share (a small margin is a near-tie, which either side may break "
            f"the other way)\n\n" + table)


def curve_line(curve: CostCurve | None) -> str:
    """The verify-cost curve T(k), k = 1..16, measured in the run (a saved report from before it: said so)."""
    if curve is None or not curve.t:
        return "- verify-cost curve T(k): not measured"
    values = " ".join(f"{t:.2f}" for t in curve.t)
    return (f"- verify-cost curve T(k), k = 1..{len(curve.t)} (a k-token forward over a one-token forward, "
            f"after {curve.context} tokens): {values}")


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
            rows.append([method_label(label), scope, num(measured, suffix="x"), num(predicted, suffix="x"),
                         DASH if not (measured and predicted) else f"{measured / predicted - 1:+.0%}",
                         num(aware, suffix="x"), DASH if not (measured and aware) else f"{measured / aware - 1:+.0%}",
                         num(known(s.acceptance)), num(known(s.alpha_hat)), num(known(s.c_hat)), num(s.verify_cost),
                         num(s.tau), count_text(s.identical, s.n),
                         num(theirs.speedup, suffix="x") if theirs else NO_COUNTERPART])
    return md_table(("row", "", "measured", "Thm 3.8", "off by", "cost-aware", "off by", "acceptance", "alpha_hat",
                     "c_hat", "verify cost", "tau", "identical to AR", "tf speedup"), rows)


def variants_section(report: BenchReport) -> str | None:
    """What each row that is a variant runs: its parameters, its draft and transformers' counterpart."""
    variants = [v for v in report.settings.rows if v.params or v.draft]
    if not variants:
        return None
    rows = [[v.label, v.method, ", ".join(f"{k}={x}" for k, x in v.params.items()) or DASH,
             v.draft_source or DASH,
             (f"`{v.transformers_counterpart}`" + (" (closest)" if v.counterpart_is_closest else ""))
             if v.transformers_counterpart else NO_COUNTERPART] for v in variants]
    return md_table(("variant", "method", "parameters", "draft", "transformers counterpart"), rows)


def record_section(report: BenchReport) -> str | None:
    rows = []
    for method, stats in report.overall.items():
        if stats.overhead is None:
            continue
        samples = [s for s in report.samples if method in s.record_on]
        off = sum(s.ours[method].wall_ms for s in samples)
        on = sum(s.record_on[method].wall_ms for s in samples)
        rows.append([method_label(method), f"{off / 1000:.2f} s", f"{on / 1000:.2f} s",
                     f"{stats.overhead:+.1%}", str(len(samples))])
    if not rows:
        return None
    return md_table(("method", "record=False", "record=True", "overhead", "runs"), rows)


def prompt_table(report: BenchReport) -> str:
    """Every prompt run: AR against the reference's, every row's speedup (a run on several backends:
    one line per prompt and backend, the rows without their backends)."""
    several = bool(report.sides)
    labels = backend_rows(report) if several else report.settings.methods
    methods = [m for m in labels if m != BASELINE and not (several and m == AGAIN)]
    ref = ref_prefix(report)
    header = ["prompt"] + (["backend"] if several else []) + ["group", "prompt tokens", "AR ms/token",
                                                              f"{ref} AR ms/token", f"AR = {ref}"]
    header += [f"{m} speedup ({ref})" for m in methods]
    shown = {side.backend: side.label for side in report.sides.values()}
    rows = []
    for s in report.samples:
        ours_ar, theirs_ar = s.ours[BASELINE], s.theirs[BASELINE]
        turn = known(s.turn) or 1
        row = [f"q{s.question_id}" + (f" turn {turn}" if turn > 1 else "")
               + (f" r{s.repeat + 1}" if report.settings.repeats > 1 else "")]
        backend = known(s.backend) or ""
        row += [shown.get(backend, backend)] if several else []
        row += [group_label(s.group), str(s.prompt_tokens), num(ours_ar.ms_per_token, 1),
               num(theirs_ar.ms_per_token, 1),
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
    return md_table(header, rows)


def _speedup_with_spread(stats: MethodStats, method: str) -> str:
    ours = stats.ours
    if not ours.n:
        return DASH
    return (speedup_cell(ours.speedup, ours.speedup_spread, method, known(ours.acceptance))
            + ("" if ours.speedup_spread is None else f" +/- {ours.speedup_spread:.2f}") + f" (n {ours.n})")


def position_table(report: BenchReport) -> str | None:
    """A session's rows that draft from a memory: the first third of the positions against the last,
    and the speedup at each position with the responses in the row's memory there; None in a run of
    separate prompts."""
    session = known(report.session)
    if session is None:
        return None
    rows = []
    for label, at in session.rows.items():
        first, last = at.first.ours.speedup, at.last.ours.speedup
        change = DASH if not (first and last) else f"{last / first - 1:+.0%}"
        each = " ".join(DASH if x is None else f"{x:.2f}" for x in at.speedups)
        memory = f"{at.memory[0]}..{at.memory[-1]}" if at.memory else DASH
        rows.append([method_label(label), _speedup_with_spread(at.first, label), _speedup_with_spread(at.last, label),
                     change, memory, each])
    if not rows:
        return "No row drafts from a memory of earlier responses (suffix decoding with --suffix-source both): " \
               "no row's speedup can change with its place in the session."
    head = f"first {session.third}" if session.third > 1 else "first"
    tail = f"last {session.third}" if session.third > 1 else "last"
    return md_table(("row", f"speedup, {head} of {len(session.order)}", f"speedup, {tail} of {len(session.order)}",
                     "last over first", "memory (responses)", "speedup at each position"), rows)


def turn_table(report: BenchReport) -> str | None:
    """A session's rows per turn (MT-bench's questions run both turns); None with one turn only."""
    session = known(report.session)
    if session is None or len(session.turns) < 2:
        return None
    turns = list(session.turns)
    labels = list(next(iter(session.turns.values())))
    rows = [[method_label(label)] + [_speedup_with_spread(session.turns[t][label], label) for t in turns]
            for label in labels]
    return md_table(["row"] + [f"turn {t}: speedup (prompts)" for t in turns], rows)
