"""Suffix decoding's memory on the command line: `run --suffix-memory` and `datastore build`. Each
bad input is one line and exit 2, and a memory file refused is left as it was."""

from __future__ import annotations

import json

import pytest

from decoders.methods.shared.suffix_memory import read_memory_file, reset_memories
from tests.cli.conftest import error_line
from tui_decode.cli.main import main

pytestmark = pytest.mark.usefixtures("isolated")
MODEL = ["--dtype", "float32", "--device", "cpu"]


@pytest.fixture(autouse=True)
def fresh_memories():
    reset_memories()
    yield
    reset_memories()


def test_an_empty_suffix_memory_path_is_refused_before_the_model_loads(capsys):
    err = error_line(capsys, ["run", "--method", "suffix", "--prompt", "Hi.", "--suffix-memory", " "])
    assert "--suffix-memory is empty; give the path of a memory file" in err


def test_a_missing_corpus_is_one_line(capsys, tmp_path):
    err = error_line(capsys, ["datastore", "build", "--corpus", str(tmp_path / "none.jsonl"),
                              "--out", str(tmp_path / "m.json")])
    assert "the corpus" in err and "does not exist" in err


def test_datastore_build_fills_a_memory_that_run_then_reads(capsys, tmp_path, smollm2):
    corpus = tmp_path / "answers.jsonl"
    corpus.write_text("\n".join(json.dumps({"text": t}) for t in (
        "The days of the week are Monday, Tuesday, Wednesday, Thursday, Friday, Saturday and Sunday.",
        "A good habit is to drink water every morning.")) + "\n")
    out = tmp_path / "memory.json"
    assert main(["datastore", "build", "--corpus", str(corpus), "--out", str(out), *MODEL]) == 0
    printed = capsys.readouterr().out
    assert f"memory {out}: 2 responses," in " ".join(printed.split()) and "added 2 documents" in printed
    kept = read_memory_file(out)
    assert kept.format == "tui-decode suffix memory" and len(kept.responses) == 2

    reset_memories()
    code = main(["run", "--method", "suffix", "--prompt", "Name the days of the week.", "--max-new-tokens", "8",
                 "--suffix-memory", str(out), *MODEL])
    _, err = capsys.readouterr()
    assert code == 0 and "suffix memory: 2 responses" in err
    assert len(read_memory_file(out).responses) == 3  # the run's response joined


@pytest.mark.parametrize("content,message", [
    (b"{\"format\": \"tui-decode suffix memory\", \"vers", "is damaged or not a memory file"),
    (json.dumps({"format": "tui-decode suffix memory", "version": 1, "identity": "x", "model": "another model",
                 "responses": []}).encode(), "was built for another model or tokenizer (another model)"),
])
def test_a_damaged_or_foreign_memory_is_refused_and_left_intact(capsys, tmp_path, smollm2, content, message):
    path = tmp_path / "memory.json"
    path.write_bytes(content)
    err = error_line(capsys, ["run", "--method", "suffix", "--prompt", "Hi.", "--max-new-tokens", "4",
                              "--suffix-memory", str(path), *MODEL])
    assert message in err
    assert path.read_bytes() == content


def test_a_corpus_that_is_not_text_is_one_line(capsys, tmp_path, smollm2):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"\xff\xfe\x00binary")
    err = error_line(capsys, ["datastore", "build", "--corpus", str(corpus), "--out", str(tmp_path / "m.json"),
                              *MODEL])
    assert "is not UTF-8 text" in err and not (tmp_path / "m.json").exists()
