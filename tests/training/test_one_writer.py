"""One writer a folder, and nothing lost to a kill (issue 40): two processes growing one corpus,
two trainings of one head folder, a finished head trained again with more epochs, a kill between
a head's weights and its config, and a kill in the middle of writing a checkpoint. Every second
writer is a real process (or thread), every kill a SIGKILL at a named point
($TUI_DECODE_TEST_KILL_AT)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time

import pytest
import torch

from decoders.core.errors import DecodeError
from decoders.training.corpus import Corpus
from decoders.training.session import CHECKPOINT, REPORT, train_head
from tests.support.writers import dead_pid, held_elsewhere, run_python
from tests.training.test_train_head import VOCAB, TinyFamily, grow_corpus, settings

APPEND = """
import sys
from decoders.training.corpus import Corpus
corpus = Corpus(sys.argv[1], model="tiny", vocab_size=64, append=True)
corpus.append("q0", [5, 6, 7], [8, 9])
"""

TRAIN = """
import sys
from pathlib import Path
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
import decoders.training.session as session
from tests.training.test_train_head import TinyFamily, settings
session.CHECKPOINT_SECONDS = float(sys.argv[2])
session.train_head(settings(Path(sys.argv[1]), epochs=float(sys.argv[3]), lr=float(sys.argv[4])), TinyFamily(),
                   report=lambda _: None)
"""


@pytest.fixture(scope="module")
def family():
    torch.manual_seed(0)
    return TinyFamily()


def md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def temporary_files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".tmp-"))


@pytest.mark.slow  # two processes of their own
def test_a_second_process_growing_the_same_corpus_is_told_who_grows_it(tmp_path):
    """Two `--grow` on one corpus both wrote their samples at the same offsets (index q0, p0 at
    token 0 each, tokens of both) and the next one refused the corpus; now the second is one line
    naming the first and its process, exits, and writes nothing."""
    folder = tmp_path / "corpus"
    corpus = Corpus(folder, model="tiny", vocab_size=VOCAB, append=True)
    corpus.append("p0", [1, 2, 3], [4])
    second = run_python(APPEND, str(folder))
    assert second.returncode == 1 and "FolderBusy" in second.stderr, second.stderr
    said = second.stderr.strip().splitlines()[-1]
    assert f"The corpus {folder} is being written by process {os.getpid()} (`" in said
    assert said.endswith("; wait for it to end, or add --wait to wait for it"), said
    corpus.append("p1", [5], [6, 7])
    corpus.close()
    again = Corpus(folder)
    assert [s.key for s in again.samples] == ["p0", "p1"] and again.ids(again.samples[1]) == [5, 6, 7]
    assert (folder / "tokens.u16").stat().st_size == 7 * 2
    after = run_python(APPEND, str(folder))  # the first closed it: the second may grow it now
    assert after.returncode == 0, after.stderr
    assert [s.key for s in Corpus(folder).samples] == ["p0", "p1", "q0"]
    assert sorted(p.name for p in folder.iterdir()) == ["index.jsonl", "meta.json", "tokens.u16"]


def test_opening_a_corpus_to_append_never_cuts_another_process_s_tokens(tmp_path):
    """Opening in append mode cut tokens.u16 to what its index names: the tokens another process
    had written and not yet indexed were cut, shifting its later samples. The corpus is held by
    the process appending to it now, so another one's opening is refused and the tokens stay."""
    folder = tmp_path / "corpus"
    corpus = Corpus(folder, model="tiny", vocab_size=VOCAB, append=True)
    corpus.append("p0", [1, 2], [3])
    with open(folder / "tokens.u16", "ab") as f:  # this process's next sample, not yet indexed
        f.write(b"\x05\x00\x06\x00")
    opened = run_python("import sys\nfrom decoders.training.corpus import Corpus\nCorpus(sys.argv[1], append=True)\n",
                        str(folder))
    assert opened.returncode == 1 and f"being written by process {os.getpid()}" in opened.stderr, opened.stderr
    assert (folder / "tokens.u16").stat().st_size == 5 * 2
    corpus.close()


def test_a_grow_that_waits_goes_on_once_the_other_is_done(tmp_path):
    folder = tmp_path / "corpus"
    said: list[str] = []
    opened: list[Corpus] = []
    with held_elsewhere(folder, "the corpus") as pid:
        waiter = threading.Thread(target=lambda: opened.append(
            Corpus(folder, model="tiny", vocab_size=VOCAB, append=True, wait=True, on_wait=said.append)))
        waiter.start()
        deadline = time.monotonic() + 60
        while not said and time.monotonic() < deadline:
            time.sleep(0.02)
        assert said and f"being written by process {pid}" in said[0] and said[0].endswith("waiting for it to end")
        assert not opened
    waiter.join(60)
    assert opened and opened[0].append("p0", [1], [2]).start == 0
    opened[0].close()


@pytest.mark.slow  # three training runs
def test_a_finished_head_is_not_trained_again_to_more_epochs_in_silence(tmp_path, family):
    """`--epochs 1` then `--epochs 20` on one --out trained nothing and wrote training.json saying
    20 epochs in 0 s; now it is refused in one line saying how (`--fresh`, a new --out), and
    `--fresh` trains for real."""
    grow_corpus(tmp_path / "corpus", family.main_model, samples=10)
    head = tmp_path / "head"
    train_head(settings(tmp_path, epochs=0.5), family, report=lambda _: None)
    weights, report = md5(head / "model.safetensors"), json.loads((head / REPORT).read_text())
    with pytest.raises(DecodeError, match=r"finished training for 0.5 epochs; training it to 2 would start over: "
                                          r"give a new --out, or add --fresh"):
        train_head(settings(tmp_path, epochs=2.0), family, report=lambda _: None)
    assert md5(head / "model.safetensors") == weights and json.loads((head / REPORT).read_text()) == report
    said: list[str] = []
    again = train_head(settings(tmp_path, epochs=0.5), family, report=said.append)  # the same: written again
    assert any("is finished" in line for line in said), said
    assert again.train_seconds == report["train_seconds"] > 0  # its own training time, not 0
    fresh = train_head(settings(tmp_path, epochs=2.0), family, report=lambda _: None, fresh=True)
    assert md5(head / "model.safetensors") != weights
    assert fresh.settings.epochs == 2.0 and fresh.train_seconds > 0
    assert json.loads((head / REPORT).read_text())["settings"]["epochs"] == 2.0


def test_a_second_training_of_the_same_head_folder_is_told_who_writes_it(tmp_path, family):
    with held_elsewhere(tmp_path / "head", "the head folder") as pid:
        with pytest.raises(DecodeError, match=f"The head folder {tmp_path / 'head'} is being written by process "
                                              f"{pid} "):
            train_head(settings(tmp_path, epochs=0.5), family, report=lambda _: None)
    assert not (tmp_path / "head" / "model.safetensors").exists()


@pytest.mark.slow  # three training runs, one in a process of its own
def test_a_head_killed_between_its_weights_and_its_config_is_refused_then_written_whole(tmp_path, family,
                                                                                         monkeypatch):
    """Weights and config.json were two renames: a kill between them paired new weights with the
    old config, and the head loaded. Now the config names its weights' id: the pair is refused in
    one line, and the same command again writes the head whole from its finished checkpoint."""
    from decoders.backends.heads.load import load_head

    grow_corpus(tmp_path / "corpus", family.main_model, samples=10)
    head = tmp_path / "head"
    train_head(settings(tmp_path, epochs=0.5), family, report=lambda _: None)
    config = (head / "config.json").read_text()
    (head / CHECKPOINT).unlink()  # the next one trains anew, at another learning rate: other weights
    killed = run_python(TRAIN, str(tmp_path), "60", "0.5", "0.01", kill_at="head:config",
                        env={"TUI_DECODE_CACHE_DIR": str(tmp_path / "cache")})
    assert killed.returncode == -9, killed.stderr
    assert (head / "config.json").read_text() == config  # the old config beside the new weights
    with pytest.raises(DecodeError, match=r"holds the weights of one save and the config.json of another .* run the "
                                          r"same `tui-decode train-head --out` again"):
        load_head(head, family.main_model)
    said: list[str] = []
    train_head(settings(tmp_path, epochs=0.5, lr=0.01), family, report=said.append)
    assert any("is finished" in line for line in said), said  # from its checkpoint, no training again
    load_head(head, family.main_model)
    config = json.loads((head / "config.json").read_text())
    assert config["tui_decode_weights_id"] == json.loads((head / REPORT).read_text())["head_id"]
    assert temporary_files(head) == []


@pytest.mark.slow  # a training run killed mid-checkpoint in a process of its own, then resumed
def test_a_training_killed_while_writing_its_checkpoint_resumes_and_leaves_no_temporary_file(tmp_path, family):
    """A kill mid-save left a 62 MB .tmp-checkpoint.pt.* behind for good; now the next run removes
    it (its process is gone) and resumes from the checkpoint before it."""
    grow_corpus(tmp_path / "corpus", family.main_model, samples=10)
    head = tmp_path / "head"
    killed = run_python(TRAIN, str(tmp_path), "0", "2.0", "0.003", kill_at=f"write:{CHECKPOINT}@3",
                        env={"TUI_DECODE_CACHE_DIR": str(tmp_path / "cache")})
    assert killed.returncode == -9, killed.stderr
    left = temporary_files(head)
    assert len(left) == 1 and left[0].startswith(f".tmp-{CHECKPOINT}."), left
    said: list[str] = []
    train_head(settings(tmp_path, epochs=2.0), family, report=said.append)
    assert f"removed {left[0]}, a temporary file of an interrupted write" in said, said
    assert any("resuming" in line and "at step 2" in line for line in said), said
    assert temporary_files(head) == []


def test_temporary_files_of_a_process_that_is_gone_are_removed_at_the_next_start(tmp_path):
    """A live writer's temporary file stays; a dead one's goes; an older version's (no process
    id in its name) goes too when the folder is held."""
    folder = tmp_path / "corpus"
    Corpus(folder, model="tiny", vocab_size=VOCAB, append=True).close()
    gone, live = dead_pid(), os.getppid()
    for name in (f".tmp-index.jsonl.{gone}.abcd1234", f".tmp-meta.json.{live}.abcd1234", ".tmp-tokens.u16.x1y2z3w4"):
        (folder / name).write_bytes(b"x" * 100)
    Corpus(folder, append=True).close()
    assert temporary_files(folder) == [f".tmp-meta.json.{live}.abcd1234"]
