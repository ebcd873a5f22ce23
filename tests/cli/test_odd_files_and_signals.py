"""Odd files and signals on the command line (a device map that is no JSON file, an empty saved
run, dangling model links, a config folder that is a file, terminal escapes in a saved run, a
second ctrl+c, exclusive writes): each case one line and the exit code the docs promise
(2 bad input, 130 ctrl+c, 143 SIGTERM), and nothing that was there before lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import error_line
from tests.support.tiny import save_tiny_model, tiny_model
from tui_decode.cli.main import main

pytestmark = pytest.mark.usefixtures("isolated")
PROMPT = ["--prompt", "w5 w6 w7 w5 w6"]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", model=tiny_model(layers=3))


def test_ar_with_a_device_map_runs_without_the_family_s_self_draft(capsys, isolated, tiny_folder):
    """Issue 26: `run --method ar --device-map m.json` blamed the family's int4 self-draft, which
    ar does not use; a method that drafts with nothing runs, a speculative run still says why not."""
    (isolated / "config" / "families.toml").write_text(f'[families.t]\nmain = "{tiny_folder}"\nself_draft = "int4"\n')
    device_map = isolated / "m.json"
    device_map.write_text(json.dumps({"": "cpu"}))
    argv = ["run", "--family", "t", "--device-map", str(device_map), "--max-new-tokens", "4", *PROMPT]
    for method in ("ar", "pld"):
        assert main([*argv, "--method", method]) == 0, capsys.readouterr().err
        assert "tokens / target forward" in capsys.readouterr().out
    err = error_line(capsys, [*argv, "--method", "spec"])
    assert "An int4 self-draft needs the whole main model on one device" in err


CACHE_ENV_AT_START = __import__("os").environ.get("TUI_DECODE_CACHE_DIR")


@pytest.mark.model
def test_a_device_map_onto_a_gpu_torch_cannot_use_keeps_the_converted_copy(capsys, isolated, monkeypatch):
    """Issue 26: "Torch not compiled with CUDA" (here: no accelerator) while loading the bundled
    model's converted copy was taken for a damaged copy, reconverted (97 s), and came again. The
    real converted folder stays as it was, its marker too."""
    import torch

    from decoders.models import gguf_cache
    from decoders.models.bundled import bundled_gguf_path

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    if CACHE_ENV_AT_START is None:
        monkeypatch.delenv("TUI_DECODE_CACHE_DIR")
    else:
        monkeypatch.setenv("TUI_DECODE_CACHE_DIR", CACHE_ENV_AT_START)
    folder = gguf_cache.ensure_converted(bundled_gguf_path())
    before = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}
    device_map = isolated / "gpu.json"
    device_map.write_text(json.dumps({"": 0}))
    err = error_line(capsys, ["run", "--method", "ar", "--device-map", str(device_map), "--max-new-tokens", "2",
                              *PROMPT])
    assert "device map" in err and ("accelerator" in err or "CUDA" in err), err
    assert {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()} == before


def test_a_device_map_path_that_is_no_json_file_is_said(capsys, isolated, tiny_folder):
    """A folder or FIFO given to --device-map was 'unknown device map ...; choose one of auto, ...'."""
    import os

    folder = isolated / "maps"
    folder.mkdir()
    os.mkfifo(isolated / "pipe")
    for given in (folder, isolated / "pipe"):
        err = error_line(capsys, ["run", "--main", str(tiny_folder), "--device-map", str(given), *PROMPT])
        assert f"the device map {given} is not a .json file" in err, err


def test_open_of_an_empty_file_says_it_is_empty(capsys, isolated):
    """It was '(DecodeError: Input data was truncated)', msgspec's words."""
    empty = isolated / "empty.json"
    empty.write_text("  \n")
    err = error_line(capsys, ["--open", str(empty)])
    assert f"{empty} is empty, not a saved run" in err and "truncated" not in err, err


def test_a_model_path_that_is_a_dangling_or_looping_link_is_said(capsys, isolated):
    (isolated / "gone").symlink_to(isolated / "nowhere")
    (isolated / "a").symlink_to(isolated / "b")
    (isolated / "b").symlink_to(isolated / "a")
    for link in ("gone", "a"):
        err = error_line(capsys, ["run", "--main", str(isolated / link), *PROMPT])
        assert "is a symbolic link that leads nowhere" in err and "does not exist" not in err, err


def test_a_config_folder_that_is_a_file_is_said(capsys, isolated, monkeypatch):
    """TUI_DECODE_CONFIG_DIR set to families.toml itself: its families were silently not there."""
    toml = isolated / "families.toml"
    toml.write_text('[families.mine]\nmain = "bundled"\n')
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(toml))
    err = error_line(capsys, ["families"])
    assert f"The config folder {toml} is a file, not a folder; set TUI_DECODE_CONFIG_DIR" in err, err


@pytest.mark.parametrize("change,field", [
    (lambda d: d["runs"]["method"]["tokens"].__setitem__(0, "\x1b]0;PWNED\x07X"), "runs.method.tokens[0]"),
    (lambda d: d["runs"]["method"].__setitem__("label", "spec \x1b[2J"), "runs.method.label"),
    (lambda d: d["summary"].__setitem__("explanation", "why \x1b]52;c;aGk=\x07"), "summary.explanation"),
    (lambda d: d["family"].__setitem__("label", "fam \x9b31m"), "family.label"),
])
def test_a_saved_run_s_text_with_a_terminal_escape_is_refused(tmp_path, change, field):
    """Token texts are kept in their display form (control characters made visible) and labels
    are the tool's own words: an ESC sequence there comes from a crafted file, and reached the
    terminal as the app drew it (the prompt, which may hold any character, is drawn safely)."""
    from decoders.core.errors import DecodeError
    from decoders.records.run import RunResult
    from tests.support.app import DATA

    data = json.loads((DATA / "run_spec.json").read_text())
    change(data)
    data["prompt"] = "a prompt may hold \x1b and \x00"
    path = tmp_path / "esc.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DecodeError) as err:
        RunResult.load(path)
    assert field in str(err.value) and "control character" in str(err.value), str(err.value)
    data = json.loads((DATA / "run_spec.json").read_text())
    data["prompt"] = "a prompt may hold \x1b and \x00"
    path.write_text(json.dumps(data))
    assert RunResult.load(path).prompt == "a prompt may hold \x1b and \x00"


def test_shown_controls_draws_control_characters_as_pictures():
    from tui_decode.state.token_text import shown_controls

    assert shown_controls("a\x1b[2Jb\x07\tc\nd\x7f\x9b") == "a␛[2Jb␇\tc\nd␡\ufffd"
    text = "plain text ↵ stays"
    assert shown_controls(text) is text


def _blocked_in_read(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/syscall").read_text().split()[0] in ("0", "63")
    except (OSError, IndexError):
        return False


@pytest.mark.slow
@pytest.mark.parametrize("first", ["SIGINT", "SIGTERM"])
def test_a_second_ctrl_c_while_unwinding_is_no_traceback(isolated, first):
    """ctrl+c pressed twice (or a SIGTERM and then ctrl+c): the second one landed while the first
    unwound (in main's finally, restoring the SIGTERM handler) and ended the CLI with a
    KeyboardInterrupt traceback and exit -2. The first decides the exit code; the rest wait."""
    import os
    import signal
    import subprocess
    import sys
    import time

    repo = Path(__file__).resolve().parents[2]
    fifo = isolated / "fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # a writer that stays and says nothing: the CLI waits in read
    proc = subprocess.Popen([sys.executable, "-m", "tui_decode", "run", "--method", "pld", "--prompt-file", str(fifo)],
                            cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline, seen = time.time() + 120, 0
    while time.time() < deadline and seen < 3:
        seen = seen + 1 if _blocked_in_read(proc.pid) else 0
        time.sleep(0.2)
    proc.send_signal(getattr(signal, first))
    time.sleep(0.02)  # the first is handled first (two pending at once are handled SIGINT first)
    for _ in range(40):  # ctrl+c held down: a burst while the first one unwinds
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGINT)
        time.sleep(0.002)
    out, err = proc.communicate(timeout=60)
    os.close(writer)
    assert proc.returncode == (130 if first == "SIGINT" else 143), err
    assert err.count("\n") == 1 and "Traceback" not in err, err


def test_an_exclusive_write_never_replaces_a_file_that_is_there(tmp_path):
    import errno

    from decoders.records import atomic

    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    target = tmp_path / "taken.json"
    target.write_text("first")
    with pytest.raises(atomic.WriteError) as err:
        atomic.write_text(target, "second", "the run", exclusive=True)
    assert err.value.errno == errno.EEXIST and target.read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["taken.json"]  # no temporary file left
    fresh = atomic.write_text(tmp_path / "new.json", "new", "the run", exclusive=True)
    assert fresh.read_text() == "new" and len(list(tmp_path.iterdir())) == 2


@pytest.mark.parametrize("failure", [MemoryError(), RuntimeError("DefaultCPUAllocator: not enough memory: you tried "
                                                                  "to allocate 4096 bytes.")])
def test_an_allocation_that_fails_anywhere_is_one_line_and_exit_2_not_a_crash_report(capsys, isolated, monkeypatch,
                                                                                      failure):
    """Issue 40: out of memory while timing gave "internal error ... please report it" and a crash report."""
    import tui_decode.cli.main as cli

    def no_room(args):
        raise failure

    monkeypatch.setattr(cli, "cmd_families", no_room)
    err = error_line(capsys, ["families"])
    text = str(failure) or "MemoryError"
    assert err == (f"tui-decode: error: not enough memory ({text}); give --dtype float32 (one copy of the weights), "
                   "a smaller model, fewer --max-new-tokens or a shorter prompt\n")
    assert not list((isolated / "cache").glob("crash-*.txt"))
