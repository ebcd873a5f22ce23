"""The batch bench's report (`decoders.bench.batch`): its rows as a Markdown table, the whole
report as report.md, and report.md and report.json written into a folder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from decoders.bench.common import known, known_or

if TYPE_CHECKING:
    from decoders.bench.batch import BatchReport, BatchRow


def draft_length_text(row: BatchRow) -> str:
    """The draft length a row sent: "–" (none), "≤4" (fixed), "K 0×5, 2×3, 4×10" (adaptive: how
    many iterations of the last round chose each K)."""
    if row.method == "ar" or not row.k:
        return "–"
    if row.policy != "adaptive":
        return f"≤{row.k}"
    counts = {k: row.draft_lengths.count(k) for k in sorted(set(row.draft_lengths))}
    return "K " + ", ".join(f"{k}×{n}" for k, n in counts.items()) if counts else "adaptive"


def rows_table(report: BatchReport) -> str:
    lines = ["| row | batch | tok/s (all sequences) | latency / sequence | AR tok/s | speedup | ± | tokens / "
             "forward / seq | draft length | identical |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report.rows:
        spread = "–" if r.spread is None else f"{r.spread:.3f}"
        lines.append(f"| {r.method} | {r.batch} | {r.throughput:.1f} | {r.latency_s:.2f} s | {r.ar_throughput:.1f} | "
                     f"{r.speedup:.3f}x | {spread} | {r.accepted_per_forward:.2f} | {draft_length_text(r)} | "
                     f"{'yes' if r.identical else 'no'} |")
    return "\n".join(lines)


def render_markdown(report: BatchReport) -> str:
    from decoders.bench.batch_surface import surface_table

    m, st = report.machine, report.settings
    several = bool(report.sides)
    parts = [f"# Batch bench: {report.family.label or ''}", "",
             f"{report.created}; cpu {known_or(m.cpu, '?')}; vector {known_or(m.vector, '?')}; threads "
             f"{known_or(m.threads, '?')}; load average before {known(m.load_before)}, after {known(m.load_after)}; "
             f"{st.max_new_tokens} tokens per sequence, {st.rounds} rounds", ""]
    if several:
        parts += [SEVERAL_BACKENDS, ""]
        for side in report.sides.values():
            parts += [f"### T(B, k) on {side.label}", "",
                      surface_table({int(b): row for b, row in side.surface.items()}, side.surface_unit_ms), ""]
    else:
        parts += [surface_table({int(b): row for b, row in report.surface.items()}, report.surface_unit_ms), ""]
    parts += [f"## Speedup against batch size (each beside autoregressive decoding at the same batch size"
              f"{' on the same backend' if several else ''})", "", rows_table(report), ""]
    for method, text in report.crossover.items():
        parts.append(f"- {method}: {text}")
    parts += [f"- {line}" for side in report.sides.values() for line in side.left_out]
    if report.synthetic:
        from decoders.bench.batch_figure import figure_section
        from decoders.bench.batch_synthetic import synthetic_section

        parts += ["", *synthetic_section(report.synthetic), "", *figure_section(report.synthetic)]
    adaptive = [r for r in report.rows if r.policy == "adaptive" and r.draft_lengths]
    if adaptive:
        parts += ["", "## Draft length per iteration (the cost model's K, last round; 0: a plain step)", ""]
        parts += [f"- {r.method} at batch {r.batch}: {' '.join(map(str, r.draft_lengths))}" for r in adaptive]
    parts += identity_section(report)
    if several:
        from decoders.bench.tables import agreements_table

        labels = {side.backend: side.label for side in report.sides.values()}
        parts += ["", "## Agreement between the backends' batch-1 AR outputs", "",
                  agreements_table(report.agreements, labels)]
    for note in report.notes:
        parts.append(f"note: {note}")
    return "\n".join(parts) + "\n"


#: What a report of a run on several backends says first.
SEVERAL_BACKENDS = ("The same model on each backend (`--backends`), one lane per backend: each backend's own "
                    "verify-cost surface T(B, k) (in one-position steps of one sequence on that backend), its rows "
                    "labelled by it (\"pld [llama.cpp]\"), each beside autoregressive decoding at the same batch "
                    "size on the same backend, each sequence checked against its batch-1 output on the same "
                    "backend; at each batch size the backends take turns going first.")


def identity_section(report: BatchReport) -> list[str]:
    """Each sequence against its batch-1 output: where one parted and batch 1's margin there; in a
    run on several backends, said per backend."""
    from decoders.bench.common import split_backend

    def parted(divergences) -> list[str]:
        return [f"- {d.method} at batch {d.batch}, row {d.row}: position {d.position}, batch-1 top-2 margin "
                f"{d.margin:g}" for d in divergences]

    if not report.sides:
        if not report.divergences:
            return ["", "Every sequence equals its batch-1 output."]
        return ["", "## Divergences from batch 1", "", *parted(report.divergences)]
    lines = ["", "## Divergences from batch 1 (on each backend, against its own batch-1 output)", ""]
    for side in report.sides.values():
        own = [d for d in report.divergences if split_backend(d.method)[1] == side.backend]
        lines += parted(own) or [f"- {side.label}: every sequence equals its batch-1 output on {side.label}"]
    return lines


def write_batch_report(report: BatchReport, out_dir) -> tuple[Any, Any]:
    from pathlib import Path

    from decoders.core.errors import DecodeError
    from decoders.records import atomic
    from decoders.records.codec import json_text

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DecodeError(f"cannot write the report into {out}: {exc.strerror or exc}; give a writable folder to "
                          "--out") from None
    md, js = out / "report.md", out / "report.json"
    atomic.write_text(md, render_markdown(report), what="the report")
    atomic.write_text(js, json_text(report.to_json(), ensure_ascii=False, indent=1), what="the report")
    return md, js
