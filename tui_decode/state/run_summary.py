"""A run's figures as rows, its title, and the rich table the headless command line prints (the
main screen titles its panes with the same `run_title`)."""

from __future__ import annotations

from rich.table import Table

from decoders.analysis.spread_text import spread_number, value_with_spread
from decoders.analysis.summary import Summary
from decoders.core.declarations import Figure, get_method
from decoders.records.run import Run, RunResult

#: The figures every method has, in order; the timing rows (`_timing_rows`) and the method's own
#: `Figure`s follow.
COMMON = (
    Figure("prompt_tokens", "prompt tokens", "", "{}"),
    Figure("tokens", "tokens emitted", "", "{}"),
    Figure("finish", "finished", "", "{}"),
    Figure("target_forwards", "target forwards", "", "{}"),
    Figure("tau", "tau (tokens / target forward)", "", "{:.3f}"),
    Figure("accept_rate", "acceptance of judged drafts", "", "{:.1%}"),
    Figure("mean_acceptance_length", "mean acceptance length", "", "{:.2f}"),
)


#: What stopped a run (`Run.finish`), in words: "· length" read as a label cut off.
FINISH_TEXT = {"length": "stopped at max tokens", "eos": "stopped at end of text",
               "context": "stopped at the model's context", "cancelled": "cancelled"}


def finish_text(finish: str) -> str:
    """What stopped the run, in words ("stopped at max tokens"); an unknown reason as it is."""
    return FINISH_TEXT.get(finish, finish)


def _against(value: float | None, baseline: float | None) -> str | None:
    if value is None:
        return None
    return f"{value:.1f}" + ("" if baseline is None else f" (baseline {baseline:.1f})")


#: A change of the machine's step time during a run beyond this share is named beside the figures.
MACHINE_MOVED = 0.10


def pairing_text(s: Summary) -> str | None:
    """How the speedup's baseline was timed, in a few words: stepped in alternation with the run
    (and how far the machine's speed moved meanwhile, which both sides saw), or decoded before it
    and rescaled by the drift a probe after the run measured."""
    if s.pairing == "interleaved":
        change = s.machine_change
        if change is None or not abs(change - 1.0) >= MACHINE_MOVED:  # (a NaN has not moved)
            return "interleaved with its baseline"
        return "interleaved with its baseline" + (f" · machine {change:.2f}x slower by the end" if change > 1
                                                  else f" · machine {1 / change:.2f}x faster by the end")
    if s.drift is not None:
        return f"baseline decoded earlier · drift {s.drift:.2f}x (probe after the run)"
    return None


def _timing_rows(s: Summary) -> list[tuple[str, str]]:
    """The speedups with their spread, then the times they come from, each labelled with what it
    covers, so that the table reads as the sentence under it does (the decode speedup first)."""
    wall = s.speedup_wall_spread
    raw = s.speedup_decode_raw
    rows = [
        ("decode speedup vs autoregressive", None if s.speedup_decode is None else
         value_with_spread(s.speedup_decode, s.speedup_spread)),
        ("decode speedup, raw (no drift)", None if raw is None else f"{raw:.2f}x"),
        ("end-to-end speedup (prefill included)", None if s.speedup_wall is None else
         value_with_spread(s.speedup_wall, wall)),
        ("pairing", pairing_text(s)),
        ("time to first token, ms", _against(s.ttft_ms, s.baseline_ttft_ms)),
        ("decode ms / token", _against(s.decode_ms_per_token, s.baseline_decode_ms_per_token)),
        ("ms / token, prefill included", _against(s.method_ms_per_token, s.baseline_ms_per_token)),
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
        elif fig.key == "finish":
            rows.append((fig.label, finish_text(value)))
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


def short_paths(text: str) -> str:
    """``text`` with each file path in it cut to its last part: a trained head's "ptd head
    /home/someone/.cache/tui-decode/heads/smollm2" reads "ptd head smollm2" in a title. Hub ids
    ("HuggingFaceTB/SmolLM2-135M") are not paths and stay."""
    import ntpath
    import re

    def last(match: re.Match[str]) -> str:
        word = match.group(0).rstrip("/\\")
        return ntpath.basename(word) or match.group(0)  # (ntpath splits on / and \ both)

    return re.sub(r"(?<!\S)(?:~|\.{1,2}|[A-Za-z]:)?[/\\]\S*", last, text)


def run_title(result: RunResult) -> str:
    """The run's label and, for a method that drafts with a helper, what drafted:
    "Speculative (greedy, γ=4) · int4 self-draft" (a path in it cut to its last part)."""
    helper = result.family.helper or None
    try:
        drafts = get_method(result.method.method).needs_helper
    except Exception:  # a saved run of a method this version does not have
        drafts = False
    return f"{result.method.label} · {short_paths(str(helper))}" if drafts and helper else result.method.label


def summary_table(result: RunResult) -> Table:
    s = result.summary
    from decoders.analysis.summary import sentence

    table = Table(title=run_title(result), caption=sentence(s), caption_justify="left", show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value", justify="right")
    for label, value in summary_rows(s, judged_drafts(result.method)):
        table.add_row(label, value)
    return table


def pooled_table(summaries: list[Summary]):
    """`tui-decode run --repeats N`: each run's decode speedup with its spread and how the machine
    moved, then the pooled figure (`decoders.analysis.timing.pool`)."""
    from rich.table import Table

    from decoders.analysis.timing import pool, ratio_text

    table = Table(title=f"{len(summaries)} runs pooled", title_justify="left")
    for column in ("run", "decode speedup", "raw", "end to end", "machine"):
        table.add_column(column)
    for i, s in enumerate(summaries, 1):
        spread = f" +/- {spread_number(s.speedup_spread)}" if s.speedup_spread is not None else ""
        machine = (f"{s.machine_change:.2f}x" if s.machine_change is not None else
                   f"drift {s.drift:.2f}" if s.drift is not None else "")
        table.add_row(str(i), "" if s.speedup_decode is None else f"{s.speedup_decode:.3f}x{spread}",
                      "" if s.speedup_decode_raw is None else f"{s.speedup_decode_raw:.3f}x",
                      "" if s.speedup_wall is None else f"{s.speedup_wall:.3f}x", machine)
    pooled = pool(summaries)
    if pooled is not None:
        pooled_spread = f"{pooled.spread:.3f}" if pooled.spread >= 0.0005 else spread_number(pooled.spread)
        table.add_row("pooled", f"{pooled.speedup:.3f}x +/- {pooled_spread}", "", "", "")
        table.caption = ratio_text(pooled.speedup, pooled.spread) + f" over {pooled.n} runs"
        table.caption_justify = "left"
    return table
