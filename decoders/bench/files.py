"""report.json read back: its schema and kind checked, then every field by the report's declared
type (`BenchReport`, `SweepReport`), a damaged file refused in one line naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from decoders.bench.batch import BatchReport
from decoders.bench.suite import REPORT_SCHEMA, BenchReport
from decoders.bench.sweep import SweepReport
from decoders.core.errors import DecodeError
from decoders.records.codec import convert

Report = BenchReport | SweepReport | BatchReport


def report_from_json(data: Any, source: str = "") -> Report:
    """A report back from report.json's contents (``source``: the file, for messages), every field
    checked by its declared type; DecodeError for another schema or kind, or in one line naming
    the first bad field."""
    where = f"{source} is " if source else ""
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        raise DecodeError(f"{where}not a bench report of schema {REPORT_SCHEMA}; give the report.json "
                          "that `tui-decode bench` wrote")
    kinds: dict[str, type[BenchReport] | type[SweepReport] | type[BatchReport]] = {
        "bench": BenchReport, "sweep": SweepReport, "batch": BatchReport}
    if data.get("kind") not in kinds:
        raise DecodeError(f"{source + ': ' if source else ''}unknown report kind {data.get('kind')!r}; "
                          "a bench report is of kind bench, sweep or batch")
    try:
        return convert(data, kinds[data["kind"]], root="the report")
    except DecodeError as exc:
        raise DecodeError(f"{where}not a valid bench report: {exc}") from None


def _not_json(name: str) -> Any:
    raise ValueError(f"it holds {name}, which is not a JSON number")


def load_report(path: str | Path) -> Report:
    """Read a saved report.json; DecodeError naming the file (and the field, for a damaged one)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"), parse_constant=_not_json)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise DecodeError(f"cannot read the report {path}: {getattr(exc, 'strerror', None) or exc}") from None
    except ValueError as exc:  # NaN or Infinity, which Python's json reads and JSON does not have
        raise DecodeError(f"cannot read the report {path}: {exc}; give the report.json that `tui-decode bench` "
                          "wrote") from None
    return report_from_json(data, str(path))
