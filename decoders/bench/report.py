"""The benchmark report as markdown (report.md) and JSON (report.json).

Rendering is kept apart from measuring so that a saved report.json can be re-rendered
(`load_report`), and so that the command line prints exactly the tables that report.md holds
(`decoders.bench.tables`; each cell as `decoders.bench.cells` writes it). Here: the report's
text around its tables (settings, pairing, how to read it), the whole report.md of a bench or a
sweep, and the writing of both files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from decoders.bench.batch import BatchReport
from decoders.bench.cells import (
    DASH,
    count_text,
    md_table,
    method_label,
    num,
    percent_off,
    positions_text,
    ref_prefix,
    row_methods,
)
from decoders.bench.common import known
from decoders.bench.files import Report, report_from_json
from decoders.bench.files import load_report as load_report  # read here beside write_report
from decoders.bench.llamacpp_reference import LLAMACPP_REFERENCE
from decoders.bench.machine import BenchMachine
from decoders.bench.suite import BenchReport
from decoders.bench.sweep import SweepReport
from decoders.bench.tables import (
    agreement_table,
    backends_floor_section,
    backends_table,
    floor_section,
    group_table,
    overall_table,
    position_table,
    prompt_table,
    record_section,
    targets_table,
    theorem_methods,
    theorem_section,
    turn_table,
    variants_section,
)
from decoders.core.declarations import all_methods
from decoders.core.errors import DecodeError
from decoders.records.codec import json_text


def _contention(mach: BenchMachine) -> str:
    loads = [load[0] for load in (mach.load_average_at_start, mach.load_average) if load]
    if loads and mach.cpus and max(loads) > mach.cpus:
        return (f" (**above the {mach.cpus} CPUs: other processes competed for them, so timings are noisier "
                "than on an idle machine**)")
    return ""


def _load(load: list[float] | None) -> str:
    return DASH if not load else f"{load[0]:.1f}"


def _every(k: int) -> str:
    return "every prompt" if k == 1 else f"every {({2: 'second', 3: 'third'}).get(k, f'{k}th')} prompt"


def params_line(report: BenchReport) -> str:
    """Each row's method's parameters as the flags set them (``decode_params``; a variant's own
    are in the Variants section), in the order the method declares them."""
    values, names = report.settings.decode_params, set(row_methods(report).values())
    parts = [f"{m.name} " + ", ".join(f"{s.name}={values[s.name]}" for s in m.params if s.name in values)
             for m in all_methods() if m.name in names and any(s.name in values for s in m.params)]
    return "- parameters: " + ("; ".join(parts) if parts else "none beyond the budget")


PAIRING_TEXT = {
    "interleaved": "interleaved: each with its own autoregressive baseline, decoded beside it step by step on a "
                   "second cache and timed in the same seconds, as the app runs",
    "sequential": "sequential: against the prompt's one autoregressive baseline, decoded before its rows",
}


def pairing_line(pairings: Mapping[str, str] | None, methods: Sequence[str]) -> str:
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
    parts = [f"{', '.join(method_label(m) for m in labels)} {PAIRING_TEXT.get(pairing, pairing)}"
             for pairing, labels in by.items()]
    return "- pairing: " + "; ".join(parts) + " (see the notes for why)"


def prompts_line(report: BenchReport) -> str:
    st = report.settings
    tail = f"{st.max_new_tokens} new tokens, greedy, {st.repeats} repeat(s)"
    session = known(report.session)
    if session is None:
        return f"- prompts: {len(report.prompts)} (first turn, chat template), {tail}"
    return (f"- workload: one session of {len(report.prompts)} prompts, {len(session.order)} turns in this order: "
            f"{', '.join(session.order)} (a later turn after the earlier one's answer, chat template); {tail}"
            + ("; each repeat the session again, from empty memories" if st.repeats > 1 else ""))


def memory_lines(report: BenchReport) -> list[str]:
    """The suffix memory the memory rows started from (``--suffix-memory``), where there was one."""
    kept = known(report.settings.suffix_memory)
    if kept is None:
        return []
    how = ("each memory row started the session from its own copy of it" if known(report.session) is not None
           else "the bench's answers joined a copy of it in memory")
    return [f"- suffix memory: {kept.path}, {kept.responses} responses, {kept.tokens} tokens, read at the start; "
            f"{how}, the file left as it was"]


SESSION_NOTE = (
    "The prompts ran as one session in the order above. Each row that drafts from a memory of earlier responses "
    "(suffix decoding drafting from both trees) has a memory of its own, empty at the session's start (or a copy "
    "of the suffix memory above, where there is one); its answer "
    "to each prompt joins it after the run's and its baseline's clocks stopped, before the next prompt, and a "
    "prompt's own baseline output is never in it. Only those rows are shown: nothing any other row drafts from "
    "changes between positions. Each third is pooled as the overall table pools (speedup, +/- its spread, n "
    "prompts); memory is the responses in the row's memory at the first and at the last position.")


def settings_lines(report: BenchReport) -> list[str]:
    st, fam, mach = report.settings, report.family, report.machine
    lines = [
        f"- model: {fam.label} ({fam.main}, {fam.dtype} on {fam.device}, backend {fam.backend}); "
        f"helper: {fam.helper or 'none'}",
        prompts_line(report),
        *memory_lines(report),
        params_line(report),
        pairing_line(st.pairing or None, list(report.overall)),
        f"- machine: {mach.processor}, {mach.cpus} CPUs, {mach.torch_threads} torch threads; "
        f"torch {mach.torch}, transformers {mach.transformers}; load average (1 min) "
        f"{_load(mach.load_average_at_start)} at start, {_load(mach.load_average)} at the end"
        + _contention(mach),
        f"- run took {report.elapsed_s:.0f} s, {report.created}",
    ]
    if mach.llama_cpp_python:
        lines.append(f"- llama-cpp-python {mach.llama_cpp_python}")
    if report.sides:
        for side in report.sides.values():
            calls = [f"{method_label(m)}: `{c}`" for m, c in side.counterparts.items() if c]
            lines.append(f"- {side.label} rows: {side.family.backend or None}, {side.family.dtype or None}; "
                         f"reference (ref) {side.reference}" + (": " + "; ".join(calls) if calls else ""))
        return lines
    counterparts = [f"{method_label(m)}: `{c}`" for m, c in st.transformers_counterparts.items() if c]
    if counterparts:
        loop = st.reference == LLAMACPP_REFERENCE
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
        from decoders.bench.batch_report import render_markdown as render_batch

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
    positions = position_table(report)
    if positions:
        parts += ["## By position in the session", "", SESSION_NOTE, "", positions, ""]
    turns = turn_table(report)
    if turns:
        parts += ["## Per turn", "", "Every row over the first turns of the session's questions, and over their "
                  "second turns (each after the first turn's answer).", "", turns, ""]
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
                  f"`record=False`, run back to back on {_every(report.settings.record_overhead_every)}, "
                  "which of the two goes first alternating.", "", record, ""]
    theirs = ("the reference's over its own AR" if ref_prefix(report) != "tf"
              else "transformers' over its generate()")
    parts += ["## Per prompt", "", f"Speedup of ours over our AR; {theirs} in brackets; "
              "≠AR@i marks an output that left the baseline at token i.", "", prompt_table(report), ""]
    return "\n".join(parts + _notes(report))


def sweep_table(report: SweepReport) -> str:
    rows = [[str(r.value), num(r.measured_speedup, suffix="x"), num(r.predicted_speedup, suffix="x"),
             percent_off(r.error), num(r.predicted_cost_aware, suffix="x"), percent_off(r.error_cost_aware),
             num(r.tau),
             num(r.acceptance), num(r.mean_acceptance_length), positions_text(r.per_position_acceptance),
             num(r.ms_per_token, 1), count_text(r.identical, r.n)] for r in report.rows]
    return md_table((report.sweep.axis, "measured speedup", "Thm 3.8", "off by", "cost-aware", "off by", "tau",
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
             f"- model: {fam.label} ({fam.backend}); helper: {fam.helper or 'none'}",
             f"- prompts: {len(report.prompts)}, {st.max_new_tokens} new tokens, greedy, {st.repeats} "
             f"repeat(s); our AR: {num(report.ar_ms_per_token, 1)} ms/token",
             sweep_pairing_line(known(st.pairing)),
             f"- run took {report.elapsed_s:.0f} s, {report.created}", "",
             "Measured: mean tokens/s over mean AR tokens/s (Spec-Bench). Theorem 3.8: E[tokens] / (value * c + 1) "
             "from each run's own acceptance (alpha_hat for speculative decoding) and draft cost c (0 for prompt "
             "lookup and Jacobi, whose drafts need no model forward); the cost-aware form uses the measured "
             "verify cost. The theorem assumes every iteration drafts `value` tokens, which prompt lookup does "
             "only when its n-gram matches.", "",
             sweep_table(report), "", f"Fastest measured: {sw.axis}={report.best_value}.", ""]
    return "\n".join(lines + _notes(report))


def write_report(report: Report, out_dir: str | Path) -> tuple[Path, Path]:
    """Write report.json, then report.md ending with that report.json's SHA-256 (`report_pair`),
    into ``out_dir`` (created if needed). Each file is written atomically: a failure (a full disk)
    leaves the earlier report as it was, and a bench stopped between the two is told from a pair."""
    from decoders.bench.report_pair import pair_line
    from decoders.records import atomic
    from decoders.records.folder import kill_point

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DecodeError(f"cannot write the report into {out}: {exc.strerror or exc}; "
                          "give a writable folder to --out") from None
    md, js = out / "report.md", out / "report.json"
    data = json_text(report.to_json(), ensure_ascii=False, indent=1).encode("utf-8")
    atomic.write_bytes(js, data, what="the report")
    kill_point("report:md")  # a test stops here: the new report.json beside the last report.md
    atomic.write_text(md, render_markdown(report) + pair_line(data), what="the report")
    return md, js
