"""No module over 400 lines (issue 37): past that a module holds more than one idea, and a reader
loses the thread. A module that grows past it is split along a seam (a cohesive group of functions
or classes into a module of the same package), not trimmed by squeezing lines."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The most lines a source module may have.
MAX_LINES = 400
#: The folders whose every .py file is held to it.
CHECKED = ("decoders", "tui_decode", "scripts")


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def oversized(root: Path = ROOT, limit: int = MAX_LINES) -> list[str]:
    """Each .py file under the checked folders longer than ``limit`` lines, as "path: N lines"."""
    found = []
    for folder in CHECKED:
        for path in sorted((root / folder).rglob("*.py")):
            lines = line_count(path)
            if lines > limit:
                found.append(f"{path.relative_to(root).as_posix()}: {lines} lines")
    return found


def test_no_module_is_over_400_lines():
    too_long = oversized()
    assert too_long == [], (f"modules over {MAX_LINES} lines; split each along a seam into a module of the same "
                            "package:\n" + "\n".join(too_long))


def test_the_check_names_a_module_over_the_limit(tmp_path):
    """The checker itself: a file one line over is named with its count, one at the limit is not."""
    (tmp_path / "decoders" / "deep").mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "decoders" / "deep" / "long.py").write_text("x = 1\n" * 401)
    (tmp_path / "scripts" / "fits.py").write_text("x = 1\n" * 400)
    (tmp_path / "scripts" / "notes.txt").write_text("x\n" * 1000)
    assert oversized(tmp_path) == ["decoders/deep/long.py: 401 lines"]
