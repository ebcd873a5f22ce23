"""Tables a user takes elsewhere: a sweep (and any list of summaries) as Markdown or CSV, with the
figures a reader needs to judge them (speedup with its spread, the verdict, tau, acceptance,
identity, how the baseline was paired). No Textual here."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from decoders.analysis.timing import verdict
from decoders.records.summary import Summary

COLUMNS = ("speedup", "spread", "verdict", "end_to_end", "tau", "accept_rate", "identical", "tokens", "pairing")


def summary_cells(s: Summary) -> list[str]:
    """One summary's cells, in `COLUMNS` order ("" for a figure not measured)."""
    speed = s.speedup_decode if s.speedup_decode is not None else s.speedup_wall

    def num(x: float | None, fmt: str = "{:.3f}") -> str:
        return "" if x is None else fmt.format(x)

    same = "" if s.identical is None else str(s.identical).lower()
    return [num(speed), num(s.speedup_spread), "" if speed is None else verdict(speed, s.speedup_spread),
            num(s.speedup_wall), num(s.tau), num(s.accept_rate), same, str(s.tokens), s.pairing or ""]


def table_csv(key: str, rows: Sequence[tuple[object, Summary]]) -> str:
    """``key`` (the swept parameter, a run's label ...) then `COLUMNS`, one row per summary."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([key, *COLUMNS])
    for value, s in rows:
        writer.writerow([value, *summary_cells(s)])
    return out.getvalue()


def table_markdown(title: str, key: str, rows: Sequence[tuple[object, Summary]], notes: Sequence[str] = ()) -> str:
    """A Markdown table under ``title``, with ``notes`` (the prompt, the machine) as a list after it."""
    head = [key, *COLUMNS]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for value, s in rows:
        cells = [str(value), *summary_cells(s)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if notes:
        lines += ["", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"
