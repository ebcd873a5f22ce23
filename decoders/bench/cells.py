"""How one figure reads in the bench report's tables (a dash for none, milliseconds with the
digits that stay meaningful, "yes (4/4)", a speedup flagged as noise), and the Markdown table they
go in; shared by the report's tables (`decoders.bench.tables`) and its text (`decoders.bench.report`).
"""

from __future__ import annotations

from typing import Sequence

from decoders.bench.aggregate import MethodStats
from decoders.bench.common import BASELINE, known, split_backend
from decoders.bench.llamacpp_reference import LLAMACPP_REFERENCE
from decoders.bench.suite import BenchReport
from decoders.core.declarations import get_method
from decoders.core.errors import DecodeError

DASH = "–"
NO_COUNTERPART = "no counterpart"


def num(x: float | None, digits: int = 2, suffix: str = "") -> str:
    return DASH if x is None else f"{x:.{digits}f}{suffix}"


def ms_text(x: float | None) -> str:
    """Milliseconds with enough digits to stay meaningful for tiny models too."""
    if x is None:
        return DASH
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def count_text(part: int | None, whole: int | None) -> str:
    if part is None or whole is None:
        return DASH
    mark = "yes" if part == whole else "no"
    return f"{mark} ({part}/{whole})"


def percent_off(error: float | None) -> str:
    return DASH if error is None else f"{error:+.0%}"


def method_label(name: str) -> str:
    """A row's label for a table: the method's label ("Speculative"), then what the variant
    changes ("Speculative [int4]"); the key itself when its method is not registered (a report
    saved by another version). A row of one backend of several keeps its backend: "Prompt lookup [llama.cpp]"."""
    plain, backend = split_backend(name)
    if backend is not None:
        return method_label(plain) + name[len(plain):]
    method, bracket, rest = name.partition("[")
    try:
        label = get_method(method).label
    except DecodeError:
        return name
    return label + (f" [{rest}" if bracket else "")


def row_methods(report: BenchReport) -> dict[str, str]:
    """Each row's label and the method it runs (from the settings' variants; a report without
    them has one row per method, keyed by its name)."""
    rows = {label: split_backend(label)[0] for label in report.settings.methods}
    rows.update({v.label: v.method for v in report.settings.rows})
    return rows


def spread_text(speedup: float | None, spread: float | None) -> str:
    """"+/- 0.04", with "(no measurable difference)" when 1.00x lies inside it, for a method."""
    if spread is None:
        return DASH
    same = speedup is not None and abs(speedup - 1.0) <= spread
    return f"+/- {spread:.2f}" + (" (no measurable difference)" if same and speedup != 1.0 else "")


def speedup_cell(speedup: float | None, spread: float | None, method: str, acceptance: float | None) -> str:
    """The speedup, flagged "(noise)" in the column itself when 1.00x lies inside its spread (and,
    for a drafting row that accepted nothing, said why: it cannot be faster but by chance)."""
    cell = num(speedup, suffix="x")
    if speedup is None or spread is None or method == BASELINE or abs(speedup - 1.0) > spread:
        return cell
    return cell + (" (noise: nothing accepted)" if acceptance == 0 else " (noise)")


def positions_text(rates: list[float] | None) -> str:
    """Per-position acceptance, first draft position first: "0.80 0.55 0.30"."""
    return DASH if not rates else " ".join(f"{x:.2f}" for x in rates)


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


FIGURE_HEADER = ("method", "tau", "speedup", "spread", "acceptance", "mean acceptance length",
                 "per-position acceptance", "identical to AR", "ms/token",
                 "tf tau", "tf speedup", "tf ms/token", "matches tf", "ms/token ours/tf", "speedup ours/tf")


def ref_prefix(report: BenchReport) -> str:
    """How the columns of the other side are headed: "tf" (transformers), "lcpp" (llama-cpp-python's
    own loop), "ref" in a run of several backends (each row beside its own backend's reference)."""
    if report.sides:
        return "ref"
    return "lcpp" if report.settings.reference == LLAMACPP_REFERENCE else "tf"


def figure_header(report: BenchReport) -> tuple[str, ...]:
    prefix = ref_prefix(report)
    return tuple(h.replace("tf", prefix) if h.startswith("tf ") or h.endswith("tf") else h for h in FIGURE_HEADER)


def figure_cells(method: str, stats: MethodStats) -> list[str]:
    ours, theirs = stats.ours, stats.theirs
    return [
        method_label(method),
        num(ours.tau),
        speedup_cell(ours.speedup, ours.speedup_spread, method, known(ours.acceptance)),
        spread_text(ours.speedup, ours.speedup_spread),
        num(known(ours.acceptance)),
        num(known(ours.mean_acceptance_length)),
        positions_text(known(ours.per_position_acceptance)),
        count_text(ours.identical, ours.n),
        num(ours.ms_per_token, 1),
        num(theirs.tau if theirs else None),
        num(theirs.speedup if theirs else None, suffix="x") if theirs or method == BASELINE else NO_COUNTERPART,
        num(theirs.ms_per_token if theirs else None, 1),
        count_text(ours.matches_transformers, ours.n) if theirs else DASH,
        num(known(stats.ratio_ms_per_token)),
        num(known(stats.ratio_speedup)),
    ]
