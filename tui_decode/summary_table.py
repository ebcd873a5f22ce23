"""The run's figures as a rich table, for the headless command line."""

from __future__ import annotations

from rich.table import Table

from decoders.methods.base import Figure, get_method
from decoders.records import RunResult
from decoders.summary import Summary

#: The figures every method has, in order; the method's own `Figure`s follow.
COMMON = (
    Figure("tokens", "tokens emitted", "", "{}"),
    Figure("finish", "finished by", "", "{}"),
    Figure("target_forwards", "target forwards", "", "{}"),
    Figure("tau", "tau (tokens / target forward)", "", "{:.3f}"),
    Figure("accept_rate", "acceptance rate", "", "{:.1%}"),
    Figure("mean_acceptance_length", "mean acceptance length", "", "{:.2f}"),
    Figure("speedup_wall", "wall speedup vs autoregressive", "", "{:.2f}x"),
    Figure("baseline_ms_per_token", "baseline ms/token", "", "{:.1f}"),
    Figure("method_ms_per_token", "method ms/token", "", "{:.1f}"),
    Figure("verify_cost", "verify cost (one-token forwards)", "", "{:.2f}"),
)


def summary_rows(summary: Summary) -> list[tuple[str, str]]:
    """(label, value) of every figure the run has, common ones first, then the method's."""
    rows = []
    for fig in COMMON:
        value = getattr(summary, fig.key)
        if value is not None:
            rows.append((fig.label, fig.shown(value)))
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
    for label, value in summary_rows(s):
        table.add_row(label, value)
    return table
