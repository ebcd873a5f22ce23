"""Odd input to train-head, the corpus, the bench's prompts and --out, the llama.cpp backend and
heads: each case one line and exit code 2, before any model loads where it can be, and nothing
written where the user did not ask."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from decoders.core.errors import DecodeError
from tests.cli.conftest import error_line

pytestmark = pytest.mark.usefixtures("isolated")


@pytest.mark.parametrize("threads", ["0", "-1", "99999"])
def test_train_head_threads_are_bounded(capsys, isolated, threads):
    """`train-head --threads 0` was set_num_threads' RuntimeError (a crash report), 99999 a segfault."""
    err = error_line(capsys, ["train-head", "--threads", threads, "--corpus", str(isolated / "c"),
                              "--out", str(isolated / "h")])
    assert "--threads must be 1..1024" in err


@pytest.mark.parametrize("flag", ["--corpus", "--out"])
def test_train_head_empty_folders_are_refused(capsys, isolated, flag, monkeypatch):
    """`--out ""` loaded the model and exited 0 having done nothing; `--corpus ""` read the current folder."""
    monkeypatch.chdir(isolated)
    argv = {"--corpus": str(isolated / "c"), "--out": str(isolated / "h"), flag: ""}
    err = error_line(capsys, ["train-head", "--threads", "1", *[x for k, v in argv.items() for x in (k, v)]])
    assert f"{flag} is empty" in err
    assert sorted(os.listdir(isolated)) == ["config"]


def test_train_head_corpus_that_is_a_file_is_said_before_loading(capsys, isolated):
    corpus = isolated / "notes.txt"
    corpus.write_text("mine")
    err = error_line(capsys, ["train-head", "--threads", "1", "--corpus", str(corpus), "--out", str(isolated / "h")])
    assert "is a file; give a folder for the corpus" in err
    assert corpus.read_text() == "mine"


def _corpus(folder: Path, append: bool = True):
    from decoders.training.corpus import Corpus

    return Corpus(folder, model="m", vocab_size=64, append=append)


def test_a_corpus_index_that_is_not_utf8_is_one_line(isolated):
    folder = isolated / "corpus"
    _corpus(folder).append("p0", [1, 2], [3])
    with open(folder / "index.jsonl", "ab") as f:
        f.write(b"\xff\xfe garbage\n")
    with pytest.raises(DecodeError, match=r"index.jsonl line 2 is not UTF-8 text; delete that line"):
        _corpus(folder, append=False)


def test_a_corpus_meta_that_is_not_an_object_is_one_line(isolated):
    folder = isolated / "corpus"
    folder.mkdir()
    (folder / "meta.json").write_text("[1, 2]")
    with pytest.raises(DecodeError, match="meta.json is not a JSON object"):
        _corpus(folder)


def test_corpus_ids_beyond_the_vocabulary_are_one_line(isolated):
    """A corpus of another model (or a damaged tokens.u16): embedding's IndexError, a crash report."""
    from decoders.backends.heads.training import extract
    from tests.support.engine import peaked_model

    model = peaked_model(layers=5)
    vocab = int(model.get_input_embeddings().weight.shape[0])
    corpus = _corpus(isolated / "corpus")
    corpus.append("p0", [1, 2], [vocab + 5, 3])
    with pytest.raises(DecodeError, match=f"holds token id {vocab + 5}, beyond the main model's vocabulary"):
        extract(model, corpus, (1, 2, 3), corpus.samples)


def _prompts(isolated: Path, line: str) -> str:
    path = isolated / "p.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    return str(path)


def test_bench_prompts_nested_too_deeply(capsys, isolated):
    """json's RecursionError was a crash report."""
    err = error_line(capsys, ["bench", "--prompts", _prompts(isolated, "[" * 100_000 + "]" * 100_000)])
    assert "line 1 is not a Spec-Bench record" in err and "nested too deeply" in err


def test_bench_category_with_an_escape_sequence_is_refused(capsys, isolated):
    """The tables printed a category's ESC [31m to the terminal as it was."""
    line = json.dumps({"question_id": 1, "category": "w\x1b[31mred", "turns": ["hi"]})
    err = error_line(capsys, ["bench", "--prompts", _prompts(isolated, line)])
    assert "category holds the control character U+001B" in err


def test_bench_first_turn_has_the_prompt_bound(capsys, isolated):
    """A 5 MB first turn was tokenized (71 s for 50 MB) before being found too long for the context."""
    line = json.dumps({"question_id": 1, "category": "w", "turns": ["x" * (5 << 20)]})
    err = error_line(capsys, ["bench", "--prompts", _prompts(isolated, line)])
    assert "the first turn is longer than 4 MiB" in err


def test_bench_empty_out_is_refused(capsys, isolated, monkeypatch):
    """`--out ""` wrote report.md and report.json into the current folder, over whatever was there."""
    monkeypatch.chdir(isolated)
    (isolated / "report.md").write_text("my notes")
    line = json.dumps({"question_id": 1, "category": "w", "turns": ["hi"]})
    err = error_line(capsys, ["bench", "--prompts", _prompts(isolated, line), "--out", ""])
    assert "--out is empty" in err
    assert (isolated / "report.md").read_text() == "my notes"


def test_a_truncated_gguf_on_llamacpp_says_truncated(capsys, isolated):
    """llama.cpp's refusal of a file cut short read as an architecture it does not know, and told the
    user to upgrade llama-cpp-python; it now says the file is truncated, as the torch backend does."""
    pytest.importorskip("llama_cpp")
    from decoders.models.bundled import bundled_gguf_path

    try:
        source = bundled_gguf_path()
    except DecodeError:
        pytest.skip("the bundled model is not installed")
    cut = isolated / "cut.gguf"
    with open(source, "rb") as f:
        cut.write_bytes(f.read(5_000_000))
    err = error_line(capsys, ["run", "--backend", "llamacpp", "--main", str(cut), "--method", "ar", "--threads", "1",
                              "--prompt", "hi", "--max-new-tokens", "2"])
    assert "truncated or damaged" in err and "newer llama-cpp-python" not in err


def test_a_head_config_hidden_size_unlike_its_weights(isolated):
    """The message said 'fc takes 96 features but the target gives 96'."""
    from decoders.backends.heads.load import load_head
    from tests.support.engine import peaked_model
    from tests.support.heads import write_head

    folder = isolated / "head"
    write_head(folder, "eagle3")
    config = json.loads((folder / "config.json").read_text())
    config["hidden_size"] = 10**12
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(DecodeError, match="hidden_size is 1000000000000; its config.json does not match its weights"):
        load_head(folder, peaked_model(layers=5))


def test_train_head_progress_reaches_a_log_file_as_it_goes(isolated, capsys, monkeypatch):
    """Stdout that is no terminal (a log file, a pipe): rich draws its bar only when it closes, so a
    44-minute training printed nothing until it ended; each tenth of a phase is a line instead."""
    import decoders.training.session as session
    import tui_decode.cli.main as cli

    seen = []

    def train(settings, family, report, progress, fresh, wait):
        from decoders.records.stored import TrainingReport

        for n in range(1, 101):
            progress("training", n, 100, {"loss": 1.0 / n, "tokens": 10 * n})
            seen.append(capsys.readouterr().out)  # what the log holds while training goes on
        return TrainingReport(corpus="c", corpus_samples=1, train_tokens=99, heldout_positions=9, accept_per_depth=[0.5],
                              mean_accepted=0.5, train_seconds=1.0, extract_tokens_per_s=1.0)

    monkeypatch.setattr(session, "train_head", train)
    monkeypatch.setattr(session, "check_settings", lambda settings: None)
    monkeypatch.setattr(cli, "load_with_progress", lambda spec, console: object())
    (isolated / "c").mkdir()
    assert cli.main(["train-head", "--threads", "1", "--corpus", str(isolated / "c"), "--out", str(isolated / "h"),
                 "--measure-tokens", "0"]) == 0
    assert "training: 10/100 (loss 0.100, 100 tokens seen)" in seen[9]
    assert sum(bool(out.strip()) for out in seen) == 11  # its start and each tenth, not a line a step
