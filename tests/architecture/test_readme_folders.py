"""The README's table of folder variables stays in step with the code: every TUI_DECODE_*_DIR the
code reads has a row (what the folder holds, its default), and no row names one the code does not
read."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
VARIABLE = re.compile(r"\bTUI_DECODE_[A-Z0-9_]+_DIR\b")


def variables_in_code() -> set[str]:
    found: set[str] = set()
    for folder in ("decoders", "tui_decode", "scripts"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".sh") and path.is_file():
                found |= set(VARIABLE.findall(path.read_text(encoding="utf-8")))
    return found


def table_rows() -> dict[str, list[str]]:
    """The README's rows that start with a folder variable: {variable: [holds, default]}."""
    rows = {}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and (name := VARIABLE.fullmatch(cells[0].strip("`"))):
            rows[name.group(0)] = cells[1:]
    return rows


def test_the_code_reads_folder_variables():
    assert {"TUI_DECODE_CACHE_DIR", "TUI_DECODE_CONFIG_DIR"} <= variables_in_code()  # the grep finds them


def test_the_readme_has_a_row_for_every_folder_variable_the_code_reads():
    rows = table_rows()
    assert sorted(variables_in_code() - set(rows)) == [], "add a row to the README's 'Where files go' table"
    assert sorted(set(rows) - variables_in_code()) == [], "the README names a folder variable the code does not read"
    for name, (holds, default, *_) in rows.items():
        assert holds and default, f"{name}: say what the folder holds and its default"
