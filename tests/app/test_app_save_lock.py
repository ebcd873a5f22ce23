"""ctrl+s writes a run and its screenshot under the runs folder's lock (issue 40's one rule): while
another process writes into the folder, the save is one line naming it and nothing is half
written; once it is done, ctrl+s saves both."""

from __future__ import annotations

import pytest

from tests.support.app import SIZE, errors, make_app, run_and_wait, wait_for
from tests.support.writers import held_elsewhere

pytestmark = pytest.mark.anyio


async def test_ctrl_s_while_another_process_writes_the_runs_folder_is_one_line_then_saves(tiny_spec, loader,
                                                                                          tmp_path):
    runs = tmp_path / "runs"
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await run_and_wait(pilot, app)
        with held_elsewhere(runs, "the runs folder") as pid:
            await pilot.press("escape", "ctrl+s")
            await wait_for(pilot, lambda: errors(app))
            message = errors(app)[-1]
            assert message.startswith(f"not saved: The runs folder {runs} is being written by process {pid} ") and \
                message.endswith("; wait for it to end, or press ctrl+s again in a moment"), message
            assert not list(runs.glob("*.json")) and not list(runs.glob("*.svg"))
        await pilot.press("ctrl+s")
        screen = app.main_screen
        await wait_for(pilot, lambda: "saved" in screen.status.message)
    assert len(list(runs.glob("*.json"))) == 1 and len(list(runs.glob("*.svg"))) == 1
    assert sorted(p.name for p in runs.iterdir() if p.name.startswith(".")) == []
