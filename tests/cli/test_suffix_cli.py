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


@pytest.mark.parametrize("name,content,message", [
    ("c.txt", b"\x7fELF\x02\x01\x01\x00\xf0\x9f", "is not UTF-8 text"),
    ("c.txt", b"", "holds no text"),
    ("c.jsonl", b'{"body": "hello"}\n', "line 1 of the corpus"),
    ("c.jsonl", b'{"text": "one"}\n{"text": 5}\n', "line 2 of the corpus"),
    ("folder", None, "is not a train-head corpus"),
])
def test_a_bad_corpus_is_refused_before_the_model_loads(capsys, tmp_path, monkeypatch, name, content, message):
    """A corpus that is not text, empty, or a JSONL line without a text field was said only after
    the model had loaded (20 to 120 s on a busy machine, issue 40's sweep); now at once."""
    import tui_decode.cli.main as cli_main

    def no_model(*_):
        raise AssertionError("the model loaded before the corpus was checked")

    monkeypatch.setattr(cli_main, "load_with_progress", no_model)
    corpus = tmp_path / name
    if content is None:
        corpus.mkdir()
    else:
        corpus.write_bytes(content)
    err = error_line(capsys, ["datastore", "build", "--corpus", str(corpus), "--out", str(tmp_path / "m.bin"),
                              *MODEL])
    assert message in err and not (tmp_path / "m.bin").exists()


@pytest.mark.parametrize("argv,message", [
    (["run", "--method", "suffix", "--prompt", "Hi.", "--suffix-memory-mb", "16385"],
     "--suffix-memory-mb must be in 1..16384, got 16385"),
    (["run", "--method", "suffix", "--prompt", "Hi.", "--suffix-memory-mb", "0"], "--suffix-memory-mb must be in 1..16384"),
    (["--suffix-memory-mb", "1e9"], "--suffix-memory-mb takes a whole number in 1..16384"),
    (["datastore", "build", "--corpus", "c", "--out", "m", "--suffix-memory-mb", "99999"],
     "--suffix-memory-mb must be in 1..16384"),
    (["replay", "--corpus", "c", "--factor", "9"], "--factor must be in 0.1..8, got 9"),
    (["replay", "--corpus", "c", "--min-prob", "nan"], "--min-prob must be in 0..1, got nan"),
    (["replay", "--corpus", "c", "--max-draft", "65"], "--max-draft must be in 1..64, got 65"),
    (["replay", "--corpus", "c", "--limit", "100001"], "--limit must be in 1..100000"),
])
def test_every_memory_and_replay_size_has_an_upper_bound_said_in_one_line(capsys, argv, message):
    assert message in error_line(capsys, argv)


@pytest.mark.parametrize("argv", [["run", "--method", "suffix", "--prompt", "Hi.", "--suffix-memory"],
                                  ["datastore", "build", "--corpus", "c.txt", "--out"]])
def test_a_file_that_is_no_memory_at_all_is_left_and_never_said_to_be_deleted(capsys, tmp_path, monkeypatch, argv):
    """`datastore build --out notes.txt` said "delete it" of the user's notes (issue 40's sweep)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.txt").write_text("a document\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\nline two\n")
    err = error_line(capsys, [*argv, str(notes), *MODEL])
    assert f"{notes} is not a suffix memory file (" in err and "delete" not in err
    assert err.strip().endswith("it was left as it is: give the path of a memory file, or a new path to start one")
    assert notes.read_text() == "my notes\nline two\n"


def test_the_app_refuses_a_damaged_memory_file_before_it_starts(capsys, tmp_path):
    path = tmp_path / "memory.bin"
    path.write_bytes(b"\x87\xa6format")
    err = error_line(capsys, ["--suffix-memory", str(path)])
    assert "is damaged or not a memory file" in err and path.read_bytes() == b"\x87\xa6format"


def test_replay_reports_tau_and_acceptance_of_a_corpus_without_a_model(capsys, tmp_path):
    from decoders.training.corpus import Corpus

    corpus = Corpus(tmp_path / "c", model="tiny", vocab_size=64, append=True)
    answer = [9, 8, 7, 6, 5, 4, 3, 2, 1, 9, 8, 7]
    for i in range(4):
        corpus.append(f"p{i}", [1, 2 + i], answer)
    assert main(["replay", "--corpus", str(tmp_path / "c"), "--factor", "4", "--per-request"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "4 requests replayed in order, 48 response tokens; memory of 0 responses at the start" in out
    # the first request drafts from itself only; the other three from the first answer, in the memory
    assert "suffix: tau " in out and "prompt lookup: tau " in out and "request 3: 12 tokens in" in out
    err = error_line(capsys, ["replay", "--corpus", str(tmp_path)])
    assert "is not a train-head corpus folder" in err


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    from tests.support.tiny import save_tiny_model

    return str(save_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.mark.parametrize("json_to", [None, "-"])
def test_a_memory_file_that_cannot_be_written_is_one_line_after_the_runs_figures(capsys, tmp_path, monkeypatch,
                                                                                 tiny_folder, json_to):
    """A full disk after the run: the figures (or the JSON) still printed, then one line saying what was not
    written, exit 2 (as a failed --json write); the old file left as it was."""
    import errno

    import decoders.records.atomic as atomic

    path = tmp_path / "memory.bin"
    argv = ["run", "--method", "suffix", "--prompt", "w5 w6 w7 w5 w6", "--max-new-tokens", "4", "--main", tiny_folder,
            "--suffix-memory", str(path), *MODEL] + (["--json", json_to] if json_to else [])
    assert main(argv) == 0 and path.exists()
    capsys.readouterr()
    kept = path.read_bytes()

    def full_disk(handle, data) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "_write_all", full_disk)
    reset_memories()
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2
    assert ('"method"' in out) if json_to else ("Speedup" in out or "speedup" in out)  # the run still shown
    lines = [line for line in err.splitlines() if "error" in line]
    assert lines == [f"tui-decode: error: nothing was written to the suffix memory {path}: no space left on device; "
                     + atomic.fix_for(OSError(errno.ENOSPC, ""))]
    assert path.read_bytes() == kept
