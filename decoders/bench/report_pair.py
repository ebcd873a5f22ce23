"""report.md and report.json as one report: report.md, written second, ends with the SHA-256 of the
report.json it renders (`pair_line`), so that a bench stopped between the two renames (or any other
mismatch) is told from a whole pair (`report_pair_problem`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

PAIR_MARK = "<!-- report.json sha256: "  # report.md's last line: the report.json it renders


def pair_line(report_json: bytes) -> str:
    """What follows the rendered report in report.md: a blank line and the SHA-256 of its report.json."""
    return f"\n{PAIR_MARK}{hashlib.sha256(report_json).hexdigest()} -->\n"


def report_pair_problem(out_dir: str | Path) -> str | None:
    """Why report.md and report.json in ``out_dir`` are not one report (a bench stopped between
    writing them), or None: either missing, or report.md's last line names report.json's SHA-256
    (a report.md of a version that named none is taken as it is)."""
    out = Path(out_dir)
    md, js = out / "report.md", out / "report.json"
    try:
        if not md.exists() or not js.exists():  # a first bench stopped before report.md: nothing to mistake
            return None
        with md.open("rb") as handle:
            handle.seek(max(0, md.stat().st_size - 256))
            tail = handle.read().decode("utf-8", "replace")
        named = tail.rpartition(PAIR_MARK)[2].partition(" -->")[0] if PAIR_MARK in tail else None
        if named is None:
            return None
        if hashlib.sha256(js.read_bytes()).hexdigest() != named:
            return "report.md renders another report.json than the one beside it"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    return None
