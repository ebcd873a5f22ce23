"""Hostile files met by a live app session (issue 14): the session survives, keeps its run, its
prompt edits and its loaded models, and says in one notification what was wrong."""

from __future__ import annotations

import pytest

from decoders.core.errors import DecodeError
from tests.support.app import errors, make_app, run_and_wait, wait_for

pytestmark = pytest.mark.anyio
SIZE = (140, 45)


@pytest.mark.parametrize("data,message", [
    ('[families.x]\nmain = "bundled"\n'.encode("utf-16"), "is not UTF-8 text (it looks like UTF-16)"),
    (b"[families.x\nmain = 1", "not valid TOML"),
])
async def test_f_with_a_broken_families_toml_keeps_the_session(tiny_spec, loader, tmp_path, monkeypatch,
                                                               data, message):
    config = tmp_path / "config"
    config.mkdir()
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(config))
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        first = await run_and_wait(pilot, app)
        screen = app.main_screen
        screen.prompt_pane.editor.insert(" w13 w14")  # an edit not saved anywhere
        edited = screen.prompt_pane.text
        loaded = screen.loaded
        (config / "families.toml").write_bytes(data)
        await pilot.press("escape")  # leave the editor, so `f` is a key and not text
        await pilot.press("f")
        await wait_for(pilot, lambda: errors(app))
        assert message in errors(app)[-1] and "families.toml" in errors(app)[-1]
        assert app.is_running and app.screen is screen  # no picker over a broken file, no crash
        assert screen.result is first and screen.prompt_pane.text == edited and screen.loaded is loaded
        second = await run_and_wait(pilot, app)  # and the session goes on
        assert second is not first and second.prompt == edited


async def test_ctrl_o_on_a_corrupt_saved_run_keeps_the_session(tiny_spec, loader, tmp_path):
    """A saved run whose summary holds a string where a number belongs, and one cut short."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parents[1] / "data" / "run_spec.json").read_text())
    data["summary"]["tau"] = "fast"
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "b-corrupt.json").write_text(json.dumps(data))
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        first = await run_and_wait(pilot, app)
        await pilot.press("escape", "ctrl+o", "enter")
        await wait_for(pilot, lambda: errors(app))
        assert "b-corrupt.json" in errors(app)[-1] and "tau" in errors(app)[-1]
        assert app.is_running and app.main_screen.result is first
        second = await run_and_wait(pilot, app)
        assert second is not first


async def test_the_status_line_gives_the_speedup_with_its_spread_in_words(tiny_spec, loader, tmp_path):
    """Never "0.32x vs autoregressive" bare: the decode speedup in words, with its spread."""
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        result = await run_and_wait(pilot, app)
        message = app.main_screen.status.message
        assert "vs autoregressive: " in message and "+/-" in message, message
        assert ("faster" in message or "slower" in message or "no measurable difference" in message)
        assert result.summary.speedup_spread is not None


def _saved_run(runs, name: str, change) -> None:
    """``tests/data/run_spec.json`` with ``change(d)`` applied, saved as ``runs/name``."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parents[1] / "data" / "run_spec.json").read_text())
    change(data)
    runs.mkdir(exist_ok=True)
    (runs / name).write_text(json.dumps(data))


async def _open_first_keeping_the_session(app, pilot, message: str) -> None:
    """Run, edit the prompt, ctrl+o the newest saved run: one error naming ``message``, and the
    run, the prompt edit and the session are all still there."""
    await wait_for(pilot, lambda: app.main_screen.loaded is not None)
    first = await run_and_wait(pilot, app)
    screen = app.main_screen
    screen.prompt_pane.editor.insert(" w13 w14")  # an edit not saved anywhere
    edited = screen.prompt_pane.text
    await pilot.press("escape", "ctrl+o", "enter")  # the newest saved run ...
    await pilot.press("down", "enter")  # ... opened anyway over the edit (ctrl+o asks first)
    await wait_for(pilot, lambda: errors(app))
    await pilot.pause()
    assert message in errors(app)[-1], errors(app)
    assert len(errors(app)) == 1 and "Traceback" not in errors(app)[-1]
    assert app.is_running and app.screen is screen
    assert screen.result is first and screen.prompt_pane.text == edited
    second = await run_and_wait(pilot, app)
    assert second is not first and second.prompt == edited


@pytest.mark.parametrize("change,message", [
    (lambda d: d["params"].__setitem__("method", "nosuch"), "params.method"),
    (lambda d: d["params"].__setitem__("gamma", "many"), "gamma"),
    (lambda d: d["params"].__setitem__("mode", ["greedy"]), "mode"),
    (lambda d: d["summary"].__setitem__("speedup_decode", 0), "summary.speedup_decode must be a number >= 1e-06"),
])
async def test_ctrl_o_on_a_run_with_bad_params_keeps_the_session(tiny_spec, loader, tmp_path, change, message):
    """Issue 26: `params` checked in full by RunResult.load (an unknown method ended the app)."""
    _saved_run(tmp_path / "runs", "zz-bad.json", change)
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _open_first_keeping_the_session(app, pilot, message)
        assert "zz-bad.json" in errors(app)[-1]


async def test_a_decode_error_while_showing_an_opened_run_keeps_the_session(tiny_spec, loader, tmp_path,
                                                                            monkeypatch):
    """Issue 26: a DecodeError raised while the panes are filled from an opened run is one
    notification; the run shown before and the prompt edit stay."""
    from tui_decode.widgets.stats_pane import StatsPane

    shown = StatsPane.show_result

    def show_result(self, result):
        if result.prompt == "a run the panes cannot show":
            raise DecodeError("this run cannot be shown")
        return shown(self, result)

    monkeypatch.setattr(StatsPane, "show_result", show_result)
    _saved_run(tmp_path / "runs", "zz-odd.json", lambda d: d.__setitem__("prompt", "a run the panes cannot show"))
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await _open_first_keeping_the_session(app, pilot, "this run cannot be shown")
        assert "zz-odd.json" in errors(app)[-1]


async def test_ctrl_o_with_a_dangling_symlink_in_the_runs_folder_keeps_the_session(tiny_spec, loader, tmp_path):
    """Issue 26: the picker lists the runs there are; a dangling ``*.json`` symlink is left out
    (sorting the files by time ended the app on it)."""
    import os

    runs = tmp_path / "runs"
    _saved_run(runs, "a-good.json", lambda d: None)
    (runs / "zz-gone.json").symlink_to(runs / "nowhere.json")
    os.mkfifo(runs / "zz-fifo.json")
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await run_and_wait(pilot, app)
        await pilot.press("escape", "ctrl+o", "enter")
        await wait_for(pilot, lambda: "opened a-good.json" in app.main_screen.status.message)
        assert not errors(app) and app.is_running



async def test_a_lone_surrogate_in_the_prompt_is_one_line_and_ctrl_s_keeps_the_run(tiny_spec, loader, tmp_path):
    """Issue 26: ctrl+r on a prompt holding a lone surrogate says so in one line (it was the
    tokenizer's TypeError); a run whose prompt holds one is saved with U+FFFD in its place, not
    lost to a UnicodeEncodeError in the writer, which saving caught only as OSError."""
    from decoders.records.run import RunResult

    runs = tmp_path / "runs"
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        first = await run_and_wait(pilot, app)
        screen = app.main_screen
        screen.prompt_pane.editor.insert(" hello \ud800 world")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: errors(app))
        assert "the prompt is not valid UTF-8 text" in errors(app)[-1] and "TypeError" not in errors(app)[-1]
        assert screen.result is first and not screen.running
        first.prompt = "hello \ud800 world"  # as a prompt that got past every check would be
        screen.prompt_pane.text = first.prompt
        await pilot.press("escape", "ctrl+s")
        await wait_for(pilot, lambda: "saved" in screen.status.message or len(errors(app)) > 1)
        assert len(errors(app)) == 1 and app.is_running, errors(app)
    saved = list(runs.glob("*.json"))
    assert len(saved) == 1 and RunResult.load(saved[0]).prompt == "hello \ufffd world"
    assert saved[0].with_suffix(".svg").is_file()


async def test_ctrl_s_with_room_for_the_json_but_not_the_svg_says_the_json_was_saved(tiny_spec, loader, tmp_path,
                                                                                     monkeypatch):
    """Issue 26: "cannot save" was said though the JSON had been written."""
    import errno

    from decoders.records import atomic

    write_bytes = atomic.write_bytes

    def full_for_svg(path, data, what="", mode=None, **kwargs):
        if str(path).endswith(".svg"):
            raise atomic.write_error(path, OSError(errno.ENOSPC, "No space left on device"), what)
        return write_bytes(path, data, what, mode, **kwargs)

    monkeypatch.setattr(atomic, "write_bytes", full_for_svg)
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await run_and_wait(pilot, app)
        await pilot.press("escape", "ctrl+s")
        await wait_for(pilot, lambda: errors(app))
        message = errors(app)[-1]
        assert message.startswith("saved ") and ".json" in message and "not its screenshot" in message, message
        assert "No space left on device" in message and "cannot save" not in message
    assert len(list((tmp_path / "runs").glob("*.json"))) == 1


async def test_ctrl_s_again_after_a_failed_screenshot_writes_the_screenshot_not_a_second_run(
        tiny_spec, loader, tmp_path, monkeypatch):
    """Issue 40: the message said to press ctrl+s again, which wrote a second JSON of the same run,
    and the history listed the run twice."""
    import errno

    from decoders.records import atomic

    write_bytes, full = atomic.write_bytes, [True]

    def full_for_svg(path, data, what="", mode=None, **kwargs):
        if str(path).endswith(".svg") and full[0]:
            raise atomic.write_error(path, OSError(errno.ENOSPC, "No space left on device"), what)
        return write_bytes(path, data, what, mode, **kwargs)

    monkeypatch.setattr(atomic, "write_bytes", full_for_svg)
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    runs = tmp_path / "runs"
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await run_and_wait(pilot, app)
        await pilot.press("escape", "ctrl+s")
        await wait_for(pilot, lambda: errors(app))
        assert errors(app)[-1].endswith("free some disk space and press ctrl+s again for the screenshot")
        [saved] = runs.glob("*.json")
        before = saved.read_bytes()
        full[0] = False  # room again
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: saved.with_suffix(".svg").is_file())
        await pilot.press("ctrl+s")  # and once more: still the one run
        await pilot.pause()
        assert list(runs.glob("*.json")) == [saved] and saved.read_bytes() == before
        assert sorted(p.name for p in runs.iterdir()) == [saved.name, saved.with_suffix(".svg").name]
        app.main_screen.history.load_saved(runs)
        assert len(app.main_screen.history.entries) == 1  # listed once


async def test_a_file_size_limit_is_said_as_such_not_as_a_full_disk(tiny_spec, loader, tmp_path, monkeypatch):
    """Issue 40: EFBIG (RLIMIT_FSIZE, `ulimit -f`) said "free some disk space"."""
    import errno

    from decoders.records import atomic

    write_bytes = atomic.write_bytes

    def too_large_for_svg(path, data, what="", mode=None, **kwargs):
        if str(path).endswith(".svg"):
            raise atomic.write_error(path, OSError(errno.EFBIG, "File too large"), what)
        return write_bytes(path, data, what, mode, **kwargs)

    monkeypatch.setattr(atomic, "write_bytes", too_large_for_svg)
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await run_and_wait(pilot, app)
        await pilot.press("escape", "ctrl+s")
        await wait_for(pilot, lambda: errors(app))
        message = errors(app)[-1]
    assert "File too large; the file-size limit of this process (ulimit -f) is smaller than the file: raise it " \
           "(ulimit -f unlimited) and press ctrl+s again for the screenshot" in message, message
    assert "disk space" not in message


@pytest.mark.parametrize("curve", [[[1]], "up", [[1, "x"]], [[0, 1.0], [2, 1.1]], [[1, 1.2], None]])
async def test_a_saved_curve_that_is_not_one_opens_without_a_plot(tiny_spec, loader, tmp_path, curve):
    """Issue 26: ``summary.curve = [[1]]`` raised in the plot while the first screen mounted,
    wedging the app; the run opens, its figures shown, with no plot."""
    import json

    from decoders.records.run import RunResult
    from tests.support.app import DATA

    data = json.loads((DATA / "run_spec.json").read_text())
    data["summary"]["curve"] = curve
    path = tmp_path / "odd-curve.json"
    path.write_text(json.dumps(data))
    app = make_app(tiny_spec, loader, tmp_path, opened=RunResult.load(path), opened_name=path.name)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.set_up.is_set())
        await pilot.pause()
        assert app.is_running and not errors(app)
        assert not app.main_screen.stats.plot.display and "identical" in app.export_screenshot()
