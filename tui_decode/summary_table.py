"""The run's figures as a rich table, for the headless command line."""

from __future__ import annotations

from rich.table import Table

from decoders.records import RunResult

ROWS = [
    ("tokens", "tokens emitted", "{}"),
    ("finish", "finished by", "{}"),
    ("target_forwards", "target forwards", "{}"),
    ("tau", "tau (tokens / target forward)", "{:.3f}"),
    ("accept_rate", "acceptance rate", "{:.1%}"),
    ("speedup_wall", "wall speedup vs autoregressive", "{:.2f}x"),
    ("baseline_ms_per_token", "baseline ms/token", "{:.1f}"),
    ("method_ms_per_token", "method ms/token", "{:.1f}"),
    ("verify_cost", "verify cost (one-token forwards)", "{:.2f}"),
    ("alpha_hat", "alpha_hat", "{:.3f}"),
    ("c_hat", "c_hat (helper / target forward)", "{:.3f}"),
    ("predicted_speedup", "predicted speedup (Thm 3.8)", "{:.2f}x"),
    ("predicted_speedup_cost_aware", "predicted, with measured verify cost", "{:.2f}x"),
    ("expected_tokens", "expected tokens / iteration", "{:.2f}"),
    ("gamma_star", "best gamma (predicted)", "{}"),
    ("identical", "identical to baseline", "{}"),
    ("first_divergence", "first divergence", "{}"),
]


def summary_table(result: RunResult) -> Table:
    s = result.summary
    table = Table(title=result.method.label, caption=s.get("explanation"), caption_justify="left",
                  show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    for key, label, fmt in ROWS:
        value = s.get(key)
        if value is None and key != "first_divergence":
            continue
        if key == "first_divergence" and "identical" not in s:
            continue
        table.add_row(label, "-" if value is None else fmt.format(value))
    return table
