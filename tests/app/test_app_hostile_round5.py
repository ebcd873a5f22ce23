"""Issue 26's fifth sweep against the real app (Pilot): saved runs whose family and params hold
odd values are opened or refused in one notification, and the session keeps what it had."""

from __future__ import annotations

import json

import pytest

from decoders.records.run import RunResult
from tests.support.app import DATA, errors, make_app, wait_for

pytestmark = pytest.mark.anyio
SIZE = (140, 45)


def screen_text(app) -> str:
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot())).replace("\xa0", " ")


def saved_run(tmp_path, change, name="odd.json"):
    data = json.loads((DATA / "run_spec.json").read_text())
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("change,shown", [
    (lambda d: d["family"].update(helper="draft [/x] head", label="fam [bold]x"), "draft [/x] head"),
    (lambda d: d["family"].update(helper=5, device={"gpu": [1]}, dtype=None), "· 5"),
    (lambda d: d.__setitem__("family", {}), "Speculative"),
    (lambda d: d["params"].update(self_draft="head", head={"path": 7}), "Speculative"),
    (lambda d: d["runs"]["method"].__setitem__("tok_iter", [10**9] * len(d["runs"]["method"]["tok_iter"])),
     "Speculative"),
])
async def test_an_opened_run_with_odd_family_or_extra_fields_is_shown(tiny_spec, loader, tmp_path, change, shown):
    """Family values are free-form (label, helper, device, dtype): whatever a file holds there is
    shown as text, never read as markup; fields this version does not know are left alone."""
    path = saved_run(tmp_path, change)
    app = make_app(tiny_spec, loader, tmp_path, opened=RunResult.load(path), opened_name=path.name)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.set_up.is_set())
        await pilot.pause()
        assert app.is_running and not errors(app), errors(app)
        assert shown in screen_text(app)


@pytest.mark.parametrize("damage,message", [
    (lambda c: c.__setitem__("rope_theta", "big"), "'rope_theta' is 'big', not a number"),
    (lambda c: c.__setitem__("num_attention_heads", 0), "num_attention_heads 0"),
    (lambda c: c.__setitem__("eagle_config", [1]), "in an object eagle_config"),
])
async def test_switching_to_a_family_with_a_damaged_head_keeps_the_models_prompt_and_run(tmp_path, monkeypatch,
                                                                                       damage, message):
    """A families.toml entry drafting with a trained head that is damaged, chosen with f: one
    notification naming the field (it was the crash words of a ValueError, a ZeroDivisionError or
    an AttributeError), and the loaded models, the prompt edit and the run shown all kept."""
    from decoders.engine import Engine
    from decoders.models.family import FamilySpec, load_family
    from tests.support.app import PROMPT, run_and_wait
    from tests.support.engine import peaked_model
    from tests.support.heads import write_head
    from tests.support.tiny import save_tiny_model
    from tui_decode.app import TuiDecodeApp
    from tui_decode.state.settings import START_PARAMS, Settings

    folder = save_tiny_model(tmp_path / "main", model=peaked_model(layers=5))
    head = tmp_path / "head"
    head.mkdir()
    write_head(head, "eagle3")
    config = json.loads((head / "config.json").read_text())
    damage(config)
    (head / "config.json").write_text(json.dumps(config))
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "families.toml").write_text(
        f'[families.zz-head]\nmain = "{folder}"\ndevice = "cpu"\ndtype = "float32"\nself_draft = "head"\n'
        f'head = "{head}"\n')
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path / "config"))
    spec = FamilySpec(name="plain", main=str(folder), device="cpu", dtype="float32", label="tiny")
    calls = []

    def load(spec, progress):
        calls.append(spec.name)
        return load_family(spec)

    app = TuiDecodeApp(spec, load_family=load, engine_factory=Engine, runs_folder=tmp_path / "runs", prompt=PROMPT,
                       settings=Settings(START_PARAMS.replace(method="spec", max_new_tokens=8)), cursor_blink=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        screen = app.main_screen
        first = await run_and_wait(pilot, app)
        screen.prompt_pane.editor.insert(" w13")
        edited, loaded = screen.prompt_pane.text, screen.loaded
        await pilot.press("escape", "f", "end", "enter")
        await wait_for(pilot, lambda: errors(app), timeout=60)
        await pilot.pause()
        [error] = errors(app)
        assert message in error and "\n" not in error and "internal error" not in error.lower(), error
        assert calls == ["plain", "zz-head"] and app.is_running and app.screen is screen
        assert screen.loaded is loaded and screen.result is first and screen.prompt_pane.text == edited
        second = await run_and_wait(pilot, app)
        assert second is not first and second.prompt == edited
