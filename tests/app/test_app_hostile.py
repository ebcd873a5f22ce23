"""Hostile files met by a live app session (issue 14): the session survives, keeps its run, its
prompt edits and its loaded models, and says in one notification what was wrong."""

from __future__ import annotations

import pytest

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
