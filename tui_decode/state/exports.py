"""Tables a user takes elsewhere: a sweep, a repeat, the run history (any list of summaries) as
Markdown or CSV, with the figures a reader needs to judge them (speedup with its spread, the
verdict, tau, acceptance, identity, how the baseline was paired); and a comparison as Markdown.
No Textual here."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

from decoders.analysis.spread_text import value_with_spread
from decoders.analysis.verdict import headline
from decoders.records.summary import Summary
from tui_decode.state.run_summary import acceptance_text, judged_drafts

COLUMNS = ("speedup", "spread", "verdict", "end_to_end", "tau", "accept_rate", "identical", "tokens", "pairing")


def summary_cells(s: Summary) -> list[str]:
    """One summary's cells, in `COLUMNS` order ("" for a figure not measured)."""
    h = headline(s)  # the figure, spread and verdict every surface gives

    def num(x: float | None, fmt: str = "{:.3f}") -> str:
        return "" if x is None else "n/a" if not math.isfinite(x) else fmt.format(x)

    same = "" if s.identical is None else str(s.identical).lower()
    return [num(h.speedup), num(h.spread), "" if h.speedup is None else h.verdict,
            num(s.speedup_wall), num(s.tau), num(s.accept_rate), same, str(s.tokens), s.pairing or ""]


Key = str | Sequence[str]  # the leading column's name, or the names of several


def _leading(key: Key, value: object) -> list[object]:
    """A row's leading cells: ``value``, or each of its values when ``key`` names several columns."""
    return [value] if isinstance(key, str) else list(value)  # type: ignore[call-overload]


def table_csv(key: Key, rows: Sequence[tuple[object, Summary]]) -> str:
    """``key`` (the swept parameter; or several columns: a history's run number, source, method
    ...) then `COLUMNS`, one row per summary."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*_leading(key, key), *COLUMNS])
    for value, s in rows:
        writer.writerow([*_leading(key, value), *summary_cells(s)])
    return out.getvalue()


def table_markdown(title: str, key: Key, rows: Sequence[tuple[object, Summary]], notes: Sequence[str] = ()) -> str:
    """A Markdown table under ``title``, with ``notes`` (the prompt, the machine) as a list after it."""
    head = [*map(str, _leading(key, key)), *COLUMNS]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for value, s in rows:
        cells = [*map(str, _leading(key, value)), *summary_cells(s)]
        lines.append("| " + " | ".join(" ".join(c.split()).replace("|", "\\|") for c in cells) + " |")
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def stream_figures(stream) -> list[tuple[str, str]]:
    """(figure, value) of one side of a comparison (`tui_decode.state.run_history.Stream`): a run's
    own figures, or, for a baseline, what the baseline measured (its speedup is 1 by definition)."""
    result, run = stream.entry.result, stream.run
    s = result.summary
    if stream.role == "baseline":
        decode, ttft = s.baseline_decode_ms_per_token, s.baseline_ttft_ms
        return [("tokens", str(len(run.ids))), ("tau", "1.00"), ("decode ms/token", _f(decode, 1)),
                ("first token ms", _f(ttft, 0)), ("decode speedup", "1.00x (the baseline)"),
                ("acceptance", "–"), ("identical", "–")]
    speed = "–" if s.speedup_decode is None else "n/a" if not math.isfinite(s.speedup_decode) else \
        value_with_spread(s.speedup_decode, s.speedup_spread, sign="±")
    accept = "–" if s.accept_rate is None else acceptance_text(s, judged_drafts(run))
    same = "–" if s.identical is None else "yes" if s.identical else f"no, at token {s.first_divergence}"
    return [("tokens", str(len(run.ids))), ("tau", _f(s.tau, 2)), ("decode ms/token", _f(s.decode_ms_per_token, 1)),
            ("first token ms", _f(s.ttft_ms, 0)), ("decode speedup", speed), ("acceptance", accept),
            ("identical", same)]


def _f(x: float | None, digits: int) -> str:
    return "–" if x is None else "n/a" if not math.isfinite(x) else f"{x:.{digits}f}"


def comparison_markdown(comparison) -> str:
    """The compare screen as Markdown: both sides' figures in one table, and where the streams part."""
    left, right = comparison.left, comparison.right
    a, b = stream_figures(left), stream_figures(right)
    lines = [f"# Compare: {left.label} | {right.label}", "", f"| figure | {left.label} | {right.label} |",
             "|---|---|---|"]
    lines += [f"| {name} | {x} | {y} |".replace("\n", " ") for (name, x), (_, y) in zip(a, b, strict=True)]
    lines += ["", comparison.summary()]
    return "\n".join(lines) + "\n"
