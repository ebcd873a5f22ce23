"""A run's figures as rows, its title, and the rich table the headless command line prints (the
main screen titles its panes with the same `run_title`)."""

from __future__ import annotations

from rich.table import Table

from decoders.analysis.summary import Summary
from decoders.core.declarations import Figure, get_method
from decoders.records.run import Run, RunResult

#: The figures every method has, in order; the timing rows (`_timing_rows`) and the method's own
#: `Figure`s follow.
COMMON = (
    Figure("prompt_tokens", "prompt tokens", "", "{}"),
    Figure("tokens", "tokens emitted", "", "{}"),
    Figure("finish", "finished by", "", "{}"),
    Figure("target_forwards", "target forwards", "", "{}"),
    Figure("tau", "tau (tokens / target forward)", "", "{:.3f}"),
    Figure("accept_rate", "acceptance of judged drafts", "", "{:.1%}"),
    Figure("mean_acceptance_length", "mean acceptance length", "", "{:.2f}"),
)


def _against(value: float | None, baseline: float | None) -> str | None:
    if value is None:
        return None
    return f"{value:.1f}" + ("" if baseline is None else f" (baseline {baseline:.1f})")


def _timing_rows(s: Summary) -> list[tuple[str, str]]:
    """The speedups with their spread, then the times they come from, each labelled with what it
    covers, so that the table reads as the sentence under it does (the decode speedup first)."""
    spread = f" +/- {s.speedup_spread:.2f}" if s.speedup_spread is not None else ""
    rows = [
        ("decode speedup vs autoregressive", None if s.speedup_decode is None else f"{s.speedup_decode:.2f}x{spread}"),
        ("end-to-end speedup (prefill included)", None if s.speedup_wall is None else f"{s.speedup_wall:.2f}x"),
        ("time to first token, ms", _against(s.ttft_ms, s.baseline_ttft_ms)),
        ("decode ms / token", _against(s.decode_ms_per_token, s.baseline_decode_ms_per_token)),
        ("ms / token, prefill included", _against(s.method_ms_per_token, s.baseline_ms_per_token)),
        ("drift (machine now / at the baseline)", None if s.drift is None else f"{s.drift:.3f}"),
    ]
    if s.compared_tokens is not None and (s.compared_tokens < s.tokens or s.finish == "cancelled"):
        rows.append(("compared over", f"the first {s.compared_tokens} tokens"))
    if s.verify_cost is not None:
        rows.append(("verify cost (one-token forwards)", f"{s.verify_cost:.2f}"))
    return [(label, value) for label, value in rows if value is not None]


def judged_drafts(run: Run) -> int:
    """Drafted tokens the target judged (accepted or rejected): what the acceptance rate divides by."""
    return sum(it.n_judged for it in run.iters)


def acceptance_text(s: Summary, judged: int | None, digits: int = 0, named: bool = True) -> str:
    """The acceptance rate with what it counts: "69% of judged drafts (11/16)"; "69% (11/16)"
    where a column header names it (``named`` False)."""
    if s.accept_rate is None:
        return "–"
    rate = f"{s.accept_rate:.{digits}%}" + (" of judged drafts" if named else "")
    return rate + (f" ({s.accepted}/{judged})" if judged is not None and s.accepted is not None else "")


def summary_rows(summary: Summary, judged: int | None = None) -> list[tuple[str, str]]:
    """(label, value) of every figure the run has, common ones first, then the method's;
    ``judged`` (see `judged_drafts`) names the acceptance rate's counts."""
    rows = []
    for fig in COMMON:
        value = getattr(summary, fig.key)
        if fig.key == "accept_rate" and value is not None:
            rows.append((fig.label, acceptance_text(summary, judged, digits=1, named=False)))
        elif value is not None:
            rows.append((fig.label, fig.shown(value)))
    rows += _timing_rows(summary)
    try:
        figures = get_method(summary.method).figures
    except Exception:  # a saved run of a method this version does not have: its common figures only
        figures = ()
    for fig in figures:
        if summary.extras.get(fig.key) is not None:
            rows.append((fig.label, fig.shown(summary.extras[fig.key])))
    if summary.identical is not None:
        rows.append(("identical to baseline", str(summary.identical)))
        rows.append(("first divergence", "-" if summary.first_divergence is None else str(summary.first_divergence)))
    return rows


def run_title(result: RunResult) -> str:
    """The run's label and, for a method that drafts with a helper, what drafted:
    "Speculative (greedy, γ=4) · int4 self-draft"."""
    helper = (result.family or {}).get("helper")
    try:
        drafts = get_method(result.method.method).needs_helper
    except Exception:  # a saved run of a method this version does not have
        drafts = False
    return f"{result.method.label} · {helper}" if drafts and helper else result.method.label


def summary_table(result: RunResult) -> Table:
    s = result.summary
    table = Table(title=run_title(result), caption=s.explanation, caption_justify="left", show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    for label, value in summary_rows(s, judged_drafts(result.method)):
        table.add_row(label, value)
    return table
