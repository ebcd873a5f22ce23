"""The environment page (docs/reference/environment.md) stays in step with the code: every variable
the code reads has a row saying what it does (a folder's row: what it holds and its default), and
no row names one the code does not read."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "reference" / "environment.md"
NAME = r"[A-Z][A-Z0-9_]*"
READS = [
    re.compile(rf"""(?:environ\.get|getenv|environ\.setdefault|_env_flag)\(\s*["']({NAME})["']"""),  # a call
    re.compile(rf"""environ\[\s*["']({NAME})["']\s*\]"""),
    re.compile(rf"""^\w*_ENV\s*=\s*["']({NAME})["']""", re.M),  # a constant the call reads: CACHE_ENV = "..."
    re.compile(r"\b(TUI_DECODE_[A-Z0-9_]+)\b"),  # the project's own, wherever they are named
]
SHELL_READS = re.compile(rf"\$\{{({NAME}):?[-?=+]")  # ${NAME:-default}: a variable the caller may set


def variables_in_code() -> set[str]:
    found: set[str] = set()
    for folder in ("decoders", "tui_decode", "scripts"):
        for path in (ROOT / folder).rglob("*"):
            if not path.is_file():
                continue
            if path.suffix == ".py":
                text = path.read_text(encoding="utf-8")
                for pattern in READS:
                    found |= set(pattern.findall(text))
            elif path.suffix == ".sh":
                text = path.read_text(encoding="utf-8")
                found |= set(SHELL_READS.findall(text)) | set(READS[-1].findall(text))
    return found


def page_rows() -> dict[str, list[str]]:
    """The page's table rows that start with a variable: {variable: [the other cells]}."""
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and (name := re.fullmatch(NAME, cells[0].strip("`"))):
            rows[name.group(0)] = cells[1:]
    return rows


def test_the_search_finds_the_variables_the_code_reads():
    found = variables_in_code()
    assert {"TUI_DECODE_CACHE_DIR", "TUI_DECODE_CONFIG_DIR", "TUI_DECODE_RUNS_DIR", "TUI_DECODE_PROMPTS_DIR",
            "TUI_DECODE_NO_LLAMACPP", "HF_HUB_OFFLINE", "PYTHON"} <= found, found


def test_every_variable_the_code_reads_has_a_row_and_no_row_is_stale():
    rows = page_rows()
    assert sorted(variables_in_code() - set(rows)) == [], f"add a row to {PAGE.relative_to(ROOT)}"
    assert sorted(set(rows) - variables_in_code()) == [], f"{PAGE.relative_to(ROOT)} names a variable the code does not read"
    for name, cells in rows.items():
        assert len(cells) >= 2 and all(cells[:2]), f"{name}: say what it does (a folder: what it holds and its default)"
