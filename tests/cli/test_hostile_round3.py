"""Issue 26's second sweep on the command line: each case one line and the exit code the README
promises (2 bad input, 130 ctrl+c, 143 SIGTERM), and nothing that was there before lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.tiny import save_tiny_model, tiny_model
from tui_decode.cli.main import main

PROMPT = ["--prompt", "w5 w6 w7 w5 w6"]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", model=tiny_model(layers=3))


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch, one_torch_thread):
    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("TUI_DECODE_RUNS_DIR", str(tmp_path / "runs"))
    (tmp_path / "config").mkdir()
    return tmp_path


def error_line(capsys, argv, code: int = 2) -> str:
    got = main(argv)
    out, err = capsys.readouterr()
    assert got == code, err
    assert err.count("\n") == 1 and "Traceback" not in err + out, err
    return err


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
