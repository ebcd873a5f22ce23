"""`tui-decode bench --batch LIST --backends LIST`: bad input refused in one line, exit 2, before any
model loads (the model named is one that would take seconds to load, or not exist at all)."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import error_line

pytestmark = pytest.mark.usefixtures("isolated")


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"question_id": 1, "category": "qa", "turns": ["What is the capital of France?"]}))
    return path


@pytest.mark.parametrize("flags,line", [
    (["--batch", "0", "--backends", "torch,llamacpp"],
     "batch size must be 1..64, got 0; give --batch sizes in that range (e.g. 1,2,4,8)"),
    (["--batch", "1,65", "--backends", "torch,llamacpp"], "batch size must be 1..64, got 65"),
    (["--batch", "1,2", "--backends", "torch,vulkan"],
     "unknown backend 'vulkan' in --backends; choose from torch, llamacpp"),
    (["--batch", "1,2", "--backends", "torch"],
     "--backends compares two or more backends, e.g. --backends torch,llamacpp; for one, use --backend NAME"),
    (["--batch", "1,2", "--backends", "torch,torch"], "a backend is named twice in --backends"),
    (["--batch", "1,2", "--backends", "torch,llamacpp", "--backend", "torch"],
     "give either --backend NAME or --backends LIST, not both"),
    (["--batch", "1,2", "--backends", "torch,llamacpp", "--synthetic-grid", "0.7:2"],
     "--synthetic-grid measures the synthetic draft on one backend; drop --backends (give --backend NAME for one) "
     "or drop --synthetic-grid"),
    (["--batch", "1,2", "--backends", "torch,llamacpp", "--methods", "ar,jacobi"],
     "--batch runs ar, pld, suffix, spec only so far, not jacobi"),
])
def test_bad_batch_input_on_several_backends_is_one_line(capsys, prompts, tmp_path, flags, line):
    err = error_line(capsys, ["bench", "--prompts", str(prompts), "--main", str(tmp_path / "absent.gguf"),
                              "--out", str(tmp_path / "o"), *flags])
    assert line in err


def test_a_folder_model_on_several_backends_is_one_line(capsys, prompts, tmp_path):
    """llama.cpp runs GGUF files: a model folder is refused before the torch side loads it."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    err = error_line(capsys, ["bench", "--prompts", str(prompts), "--main", str(folder), "--batch", "1,2",
                              "--backends", "torch,llamacpp", "--out", str(tmp_path / "o")])
    assert "--backend llamacpp runs GGUF files, and the main model" in err
