"""The atomic writer's failure line (`decoders.records.atomic`): the reason the operating system
gave and the fix that lifts it, the old file untouched and no temporary file left behind."""

from __future__ import annotations

import errno

import pytest

from decoders.records import atomic


def failing_write(err: OSError):
    def write_all(handle, data):
        handle.write(data[:1])  # part way, as a real limit would stop it
        raise err
    return write_all


def test_a_file_size_limit_says_raise_the_limit_not_free_disk_space(tmp_path, monkeypatch):
    """Issue 40: EFBIG (RLIMIT_FSIZE, `ulimit -f`) was told "check the path and try again" by the
    writer, and "free disk space" by its callers; no disk space lifts a per-process limit."""
    target = tmp_path / "run.json"
    target.write_text("old")
    monkeypatch.setattr(atomic, "_write_all", failing_write(OSError(errno.EFBIG, "File too large")))
    with pytest.raises(atomic.WriteError) as caught:
        atomic.write_text(target, "new and larger", "the run")
    message = str(caught.value)
    assert message == (f"nothing was written to the run {target}: file too large; raise the file size limit "
                       "(ulimit -f) or write elsewhere"), message
    assert "disk space" not in message
    assert caught.value.errno == errno.EFBIG
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_a_full_disk_still_says_free_disk_space(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "_write_all", failing_write(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(atomic.WriteError) as caught:
        atomic.write_text(tmp_path / "run.json", "new", "the run")
    assert str(caught.value).endswith("no space left on device; free some disk space or write somewhere else")
    assert list(tmp_path.iterdir()) == []
