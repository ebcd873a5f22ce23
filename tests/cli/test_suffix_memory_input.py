"""A suffix memory file that cannot be used is said before any model loads (issue 40's sweep, m06,
m14): over the size bound, or not a file at all (/dev/zero was read to 4 GB first); an empty file
is a new memory (m07), and `datastore build` names its own flag, --out, in what to do."""

from __future__ import annotations

import os

import pytest

import tui_decode.cli.main as cli_main
from decoders.methods.shared.suffix_memory import SuffixMemory, nodes_for_mb, read_memory_file, reset_memories
from tests.cli.conftest import error_line
from tui_decode.cli.main import main

pytestmark = pytest.mark.usefixtures("isolated")
MODEL = ["--dtype", "float32", "--device", "cpu"]
RUN = ["run", "--method", "suffix", "--prompt", "Hi.", "--max-new-tokens", "4"]


@pytest.fixture(autouse=True)
def fresh_memories():
    reset_memories()
    yield
    reset_memories()


@pytest.fixture
def no_model(monkeypatch):
    """Any model load, or the app starting, fails the test: the refusal must come first."""
    import tui_decode.app as app

    def loaded(*_, **__):
        raise AssertionError("a model loaded (or the app started) before the memory file was refused")

    monkeypatch.setattr(cli_main, "load_with_progress", loaded)
    monkeypatch.setattr(app, "run_app", loaded)


def argvs(path, corpus) -> list[list[str]]:
    """`run`, the app and `datastore build` given the memory ``path``."""
    return [[*RUN, "--suffix-memory", str(path)], ["--suffix-memory", str(path)],
            ["datastore", "build", "--corpus", str(corpus), "--out", str(path)]]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("a document\n")
    return path


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_memory_over_the_size_bound_is_refused_before_the_model_loads(capsys, tmp_path, no_model, corpus, which):
    memory = SuffixMemory(24, identity="some model", model="some model")
    n = 0
    while memory.nodes <= nodes_for_mb(1):
        memory.add(f"p{n}", [(7 * n + 3 * i) % 997 for i in range(40)])
        n += 1
    path = tmp_path / "memory.bin"
    memory.save(path)
    kept = path.read_bytes()
    err = error_line(capsys, [*argvs(path, corpus)[which], "--suffix-memory-mb", "1", *MODEL])
    flag = "--out" if which == 2 else "--suffix-memory"
    assert (f"the suffix memory {path} holds a tree of {memory.nodes:,} nodes (about 1 MB), more than this memory's "
            f"bound of {nodes_for_mb(1):,} (1 MB); give a larger --suffix-memory-mb (at most 16384) or delete it or "
            f"give {flag} another path to start a new memory") in err
    assert path.read_bytes() == kept


@pytest.mark.parametrize("which", [0, 1, 2])
@pytest.mark.parametrize("kind", ["folder", "character device", "FIFO (named pipe)"])
def test_a_memory_path_that_is_not_a_file_is_refused_at_once(capsys, tmp_path, monkeypatch, no_model, corpus,
                                                              which, kind):
    """`--suffix-memory /dev/zero` read 4 GB for 31 s, then said "larger than 4083 MiB; delete it"; a
    folder was "delete it or give --suffix-memory another path"."""
    from decoders.records import inputs

    def unread(*_):
        raise AssertionError("the device was read")

    monkeypatch.setattr(inputs, "read_upto", unread)
    path = "/dev/zero"
    if kind.startswith("FIFO"):
        path = str(tmp_path / "pipe")
        os.mkfifo(path)
    if kind == "folder":
        path = str(tmp_path / "memories")
        os.mkdir(path)
    err = error_line(capsys, [*argvs(path, corpus)[which], *MODEL])
    flag = "--out" if which == 2 else "--suffix-memory"
    assert (f"the suffix memory {path} is not a file but a {kind}; it was left as it is: give {flag} the path of "
            "a memory file, or a new path to start one") in err
    assert "delete" not in err


def test_an_empty_memory_file_is_a_new_memory(capsys, tmp_path, tiny_folder):
    """`touch mem.bin` first: an empty file holds nothing to lose, it is no damaged memory."""
    path = tmp_path / "memory.bin"
    path.touch()
    code = main([*RUN, "--prompt", "w5 w6 w7 w5 w6", "--main", tiny_folder, "--suffix-memory", str(path), *MODEL])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "suffix memory: 0 responses, 0 tokens" in err
    assert len(read_memory_file(path).responses) == 1  # written after the run


def test_replay_reads_an_empty_memory_file_as_an_empty_memory(capsys, tmp_path):
    from decoders.training.corpus import Corpus

    corpus = Corpus(tmp_path / "c", model="tiny", vocab_size=64, append=True)
    corpus.append("p0", [1, 2], [9, 8, 7, 6, 5, 4])
    (tmp_path / "memory.bin").touch()
    assert main(["replay", "--corpus", str(tmp_path / "c"), "--memory", str(tmp_path / "memory.bin")]) == 0
    assert "memory of 0 responses at the start" in " ".join(capsys.readouterr().out.split())


def test_datastore_build_names_out_in_what_to_do_with_a_damaged_memory(capsys, tmp_path, no_model, corpus):
    path = tmp_path / "memory.bin"
    path.write_bytes(b"\x87\xa6format")
    err = error_line(capsys, ["datastore", "build", "--corpus", str(corpus), "--out", str(path), *MODEL])
    assert "is damaged or not a memory file" in err and "give --out another path" in err
    assert "--suffix-memory" not in err and path.read_bytes() == b"\x87\xa6format"


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    from tests.support.tiny import save_tiny_model

    return str(save_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))
