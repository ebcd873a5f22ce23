"""What the hostile sweeps of the command line share: fresh config, cache and runs folders for a
test, and running the CLI in-process expecting one error line."""

from __future__ import annotations

import pytest

from tui_decode.cli.main import main


@pytest.fixture
def isolated(tmp_path, monkeypatch, one_torch_thread):
    """Fresh TUI_DECODE_CACHE_DIR, TUI_DECODE_CONFIG_DIR (made) and TUI_DECODE_RUNS_DIR under
    tmp_path; a module uses it for all its tests with ``pytest.mark.usefixtures("isolated")``."""
    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TUI_DECODE_RUNS_DIR", str(tmp_path / "runs"))
    (tmp_path / "config").mkdir()
    return tmp_path


def error_line(capsys, argv, code: int = 2) -> str:
    """Run the CLI on ``argv``: exit ``code``, one line on stderr, no traceback, no crash report."""
    got = main(argv)
    out, err = capsys.readouterr()
    assert got == code, err
    assert err.count("\n") == 1 and "Traceback" not in err + out and "internal error" not in err, err
    return err
