"""The app's suffix memory kept in a file (`tui-decode --suffix-memory PATH`): a write that fails after
a run (a full disk) is a notification; the run stands and is shown."""

from __future__ import annotations

import errno

import pytest

import decoders.records.atomic as atomic
from decoders.methods.shared.suffix_memory import memory_for, reset_memories
from tests.support.app import SIZE, errors, make_app, run_and_wait
from tui_decode.workers.decode import memory_loader

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def fresh_memories():
    reset_memories()
    yield
    reset_memories()


def full_disk(handle, data) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


async def test_a_memory_file_that_cannot_be_written_is_a_notification_and_the_run_stands(
        tiny_spec, loader, tiny_family, tmp_path, monkeypatch):
    path = tmp_path / "memory.bin"
    app = make_app(tiny_spec, memory_loader(str(path), None, 24, loader), tmp_path, method="suffix",
                   max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        result = await run_and_wait(pilot, app)  # written: no notification
        assert path.exists() and not errors(app)
        kept = path.read_bytes()
        monkeypatch.setattr(atomic, "_write_all", full_disk)
        second = await run_and_wait(pilot, app)
        assert second is not result and app.main_screen.status.state == "done"  # the run is shown
        [message] = errors(app)
        assert message.startswith(f"nothing was written to the suffix memory {path}: no space left on device")
        assert path.read_bytes() == kept  # the old file as it was
        assert len(memory_for(tiny_family)) == 1  # the response joined the memory all the same
