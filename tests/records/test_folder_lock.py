"""A folder's lock (`decoders.records.folder`): exclusive across processes and threads, re-entrant
in one thread, gone from the folder when released (and released by a kill); temporary files are
removed only once their process is gone."""

from __future__ import annotations

import os
import threading

import pytest

from decoders.records.atomic import write_text
from decoders.records.folder import LOCK_FILE, FolderBusy, FolderLock, sweep_temps
from tests.support.writers import dead_pid, held_elsewhere, run_python


def test_the_holder_is_named_and_the_lock_file_goes_with_the_holder(tmp_path):
    with held_elsewhere(tmp_path, "the things") as pid:
        with pytest.raises(FolderBusy) as err:
            FolderLock(tmp_path, "the things").acquire()
        said = str(err.value)
        assert said.startswith(f"The things {tmp_path} is being written by process {pid} (`python ") and \
            " UTC; wait for it to end, or add --wait to wait for it" in said, said
    assert os.listdir(tmp_path) == []  # released: nothing left in the folder
    with FolderLock(tmp_path, "the things"):
        assert os.listdir(tmp_path) == [LOCK_FILE]
    assert os.listdir(tmp_path) == []


def test_a_killed_holder_leaves_no_lock_that_holds(tmp_path):
    killed = run_python("import sys, os, signal\nfrom decoders.records.folder import FolderLock\n"
                        "FolderLock(sys.argv[1], 'x').acquire()\nos.kill(os.getpid(), signal.SIGKILL)\n",
                        str(tmp_path))
    assert killed.returncode == -9
    with FolderLock(tmp_path, "the things"):  # the operating system let go of it with the process
        pass


def test_one_thread_may_take_it_twice_another_may_not(tmp_path):
    outer = FolderLock(tmp_path, "the things").acquire()
    inner = FolderLock(tmp_path, "the things").acquire()
    inner.release()
    refused: list[BaseException] = []

    def other() -> None:
        try:
            FolderLock(tmp_path, "the things").acquire()
        except FolderBusy as err:
            refused.append(err)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert refused and f"process {os.getpid()}" in str(refused[0])
    outer.release()
    assert os.listdir(tmp_path) == []


def test_a_write_names_its_temporary_file_after_its_process(tmp_path):
    killed = run_python("import sys\nfrom decoders.records.atomic import write_text\n"
                        "write_text(sys.argv[1], 'new')\n", str(tmp_path / "a.json"), kill_at="write:a.json")
    assert killed.returncode == -9
    (left,) = os.listdir(tmp_path)
    assert left.startswith(".tmp-a.json.") and left.split(".")[-2].isdigit()
    write_text(tmp_path / "b.json", "mine")
    assert sweep_temps(tmp_path) == [left]  # its process is gone
    assert sorted(os.listdir(tmp_path)) == ["b.json"]
    mine = tmp_path / f".tmp-c.json.{os.getpid()}.abcdefgh"
    mine.write_text("being written")
    gone = f".tmp-d.json.{dead_pid()}.abcdefgh"
    (tmp_path / gone).write_text("x")
    (tmp_path / ".tmp-e.json.abcdefgh").write_text("an older version's, a moment old")
    assert sweep_temps(tmp_path) == [gone]
    assert sweep_temps(tmp_path, locked=True) == [".tmp-e.json.abcdefgh"]  # no other writer can be half way
    assert sorted(os.listdir(tmp_path)) == [mine.name, "b.json"]
