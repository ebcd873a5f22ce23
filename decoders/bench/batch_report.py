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
    parts = [f"# Batch bench: {report.family.label or ''}", "",
             f"{report.created}; cpu {known_or(m.cpu, '?')}; vector {known_or(m.vector, '?')}; threads "
             f"{known_or(m.threads, '?')}; load average before {known(m.load_before)}, after {known(m.load_after)}; "
             f"{st.max_new_tokens} tokens per sequence, {st.rounds} rounds",
             "", surface_table({int(b): row for b, row in report.surface.items()}, report.surface_unit_ms), "",
             "## Speedup against batch size (each beside autoregressive decoding at the same batch size)", "",
             rows_table(report), ""]
    for method, text in report.crossover.items():
        parts.append(f"- {method}: {text}")
    if report.synthetic:
        from decoders.bench.batch_figure import figure_section
        from decoders.bench.batch_synthetic import synthetic_section

        parts += ["", *synthetic_section(report.synthetic), "", *figure_section(report.synthetic)]
    adaptive = [r for r in report.rows if r.policy == "adaptive" and r.draft_lengths]
    if adaptive:
        parts += ["", "## Draft length per iteration (the cost model's K, last round; 0: a plain step)", ""]
        parts += [f"- {r.method} at batch {r.batch}: {' '.join(map(str, r.draft_lengths))}" for r in adaptive]
    if report.divergences:
        parts += ["", "## Divergences from batch 1", ""]
        parts += [f"- {d.method} at batch {d.batch}, row {d.row}: position {d.position}, batch-1 top-2 margin "
                  f"{d.margin:g}" for d in report.divergences]
    else:
        parts += ["", "Every sequence equals its batch-1 output."]
    for note in report.notes:
        parts.append(f"note: {note}")
    return "\n".join(parts) + "\n"


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
