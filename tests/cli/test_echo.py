"""Issue 26: an error line never echoes a 200 kB value whole (a flag's value, a file's field, a
path): each value is cut to its first 60 characters and its length, a path to 400, the line to
2000; terminal control characters in a value are shown escaped, not sent to the terminal."""

from __future__ import annotations

import json

import pytest

from decoders.core.errors import DecodeError, one_line, shown
from tests.support.app import DATA
from tui_decode.cli.main import main

LONG = "x" * 100_000


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "config").mkdir()
    return tmp_path


def error_line(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err[:300]
    return err


@pytest.mark.parametrize("argv", [
    ["run", "--method", LONG, "--prompt", "hi"],
    ["run", "--temperature", LONG, "--prompt", "hi"],
    ["run", "--max-new-tokens", LONG, "--prompt", "hi"],
    ["run", "--mode", LONG, "--prompt", "hi"],
    ["run", "--family", LONG, "--prompt", "hi"],
    ["run", "--self-draft", LONG, "--prompt", "hi"],
    ["run", "--threads", LONG, "--prompt", "hi"],
    ["run", "--prompt", "hi", f"--{LONG}"],
    ["run", "--prompt", "hi", *["ab"] * 20_000],
    [LONG],
])
def test_a_long_flag_value_is_cut_short(capsys, argv):
    err = error_line(capsys, argv)
    assert len(err) < 400, err[:500]
    assert "xxxxx" not in err or "characters)" in err or "more" in err


def test_a_long_path_is_cut_short(capsys):
    err = error_line(capsys, ["--open", "/" + LONG])
    assert len(err) < 600 and "(100001 characters)" in err, err[:700]


def _run_file(tmp_path, change) -> str:
    data = json.loads((DATA / "run_spec.json").read_text())
    change(data)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("change", [
    lambda d: d["runs"]["method"]["kinds"].__setitem__(0, "y" * 200_000),
    lambda d: d["params"].__setitem__("mode", "y" * 200_000),
    lambda d: d["params"].__setitem__("gamma", "y" * 200_000),
    lambda d: d["runs"]["method"]["iters"][1]["draft"][0].__setitem__(5, "y" * 200_000),
])
def test_a_long_field_of_a_saved_run_is_cut_short(capsys, tmp_path, change):
    err = error_line(capsys, ["--open", _run_file(tmp_path, change)])
    assert len(err) < 600 and "(200000 characters)" in err, err[:700]


def test_a_long_value_in_families_toml_is_cut_short(capsys, isolated):
    (isolated / "config" / "families.toml").write_text(f'[families.c]\nmain = "bundled"\ndevice = "{"z" * 200_000}"\n')
    err = error_line(capsys, ["families"])
    assert len(err) < 400 and "(200000 characters) is not one of auto, cpu, cuda, mps" in err, err[:500]


def test_control_characters_are_shown_escaped():
    message = str(DecodeError("cannot read /tmp/\x1b[31mred\x1b[0m\u202e.txt: it does not exist"))
    assert "\x1b" not in message and "\u202e" not in message
    assert message == "cannot read /tmp/\\x1b[31mred\\x1b[0m\\u202e.txt: it does not exist"


def test_one_line_keeps_short_values_and_the_end_of_a_long_line():
    assert one_line("unknown family 'abc'; define it") == "unknown family 'abc'; define it"
    assert shown("abc") == "'abc'" and shown("a" * 61) == f"'{'a' * 60}'… (61 characters)"
    long = one_line(" ".join(["word"] * 2000) + " fix: do this")
    assert len(long) < 2100 and long.endswith("fix: do this") and "characters left out" in long
