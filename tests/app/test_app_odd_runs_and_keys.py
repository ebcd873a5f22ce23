"""Odd saved runs, odd files and odd keys at odd times met by the real app (Pilot): a run whose
family or params hold odd values opens or is refused in one notification; control characters and
markup never reach the terminal; saves and exports never overwrite each other; the session
survives, keeps what it had, and says in one notification what was wrong."""

from __future__ import annotations

import json

import pytest

from decoders.records.run import RunResult
from tests.support.app import DATA, errors, make_app, run_and_wait, wait_for

pytestmark = pytest.mark.anyio
SIZE = (140, 45)


def screen_text(app) -> str:
    """What the screen shows, as text (the SVG screenshot without its markup)."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot())).replace("\xa0", " ")


def saved_run(tmp_path, change, name="odd.json"):
    data = json.loads((DATA / "run_spec.json").read_text())
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


async def test_compare_on_a_run_with_a_vanishing_acceptance_rate(tiny_spec, loader, tmp_path):
    """Issue 26: the compare table rebuilt the judged drafts as accepted / accept_rate: 5e-324 (a
    valid probability) made it infinite, an OverflowError that ended the app. The counts come from
    the iterations."""
    from tui_decode.screens.compare_screen import CompareScreen

    path = saved_run(tmp_path, lambda d: d["summary"].__setitem__("accept_rate", 5e-324))
    app = make_app(tiny_spec, loader, tmp_path, opened=RunResult.load(path), opened_name=path.name)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.set_up.is_set())
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.pause()
        text = screen_text(app)
        assert app.is_running and not errors(app)
        assert "acceptance" in text and "inf" not in text.replace("info", "")


async def test_control_characters_never_reach_the_terminal(tiny_spec, loader, tmp_path, monkeypatch):
    """An ESC sequence in a prompt (a pasted one, an opened run's) or in the name and text of a
    prompt file was sent to the terminal as the app drew it: ``ESC ] 0 ; ... BEL`` set the
    terminal's title (OSC 52 writes its clipboard). They are drawn as their pictures (␛)."""
    from tui_decode.screens.pickers import PromptPicker

    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "evil\x1b]0;NAME\x07.txt").write_text("Hello \x1b]0;TEXT\x07 there\n")
    monkeypatch.setenv("TUI_DECODE_PROMPTS_DIR", str(prompts))
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        editor = app.main_screen.prompt_pane.editor
        app.main_screen.prompt_pane.text = "say \x1b]0;PWNED\x07 hi"
        await pilot.pause()
        drawn = "".join(segment.text for segment in editor.render_line(0))
        assert "\x1b" not in drawn and "\x07" not in drawn and "␛]0;PWNED" in drawn, repr(drawn)
        assert app.main_screen.prompt_pane.text == "say \x1b]0;PWNED\x07 hi"  # the prompt itself is kept
        await pilot.press("escape", "p")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptPicker))
        shown = "".join(str(option.prompt) for option in app.screen.query_one("OptionList")._options)
        assert "evil␛]0;NAME␇" in shown and "Hello ␛]0;TEXT␇ there" in shown and "\x1b" not in shown


BIDI_PROMPT = ("alpha beta\u202egamma delta\u2066epsilon\u2069 zeta eta\u200ftheta iota kappa\u2067lambda mu"
               "\u2068nu xi omicron pi rho sigma tau upsilon phi chi psi omega one two three four five six seven")


async def test_bidi_controls_in_the_prompt_never_reach_the_terminal(tiny_spec, loader, tmp_path):
    """Issue 40: a prompt with bidirectional controls (U+202E, U+2066..U+2069, U+200F) was sent to
    the terminal as it was: no width to the app's wrap, a cell or a reordering to the terminal, it
    wrapped mid-word and hid a character at each wrap. The prompt pane leaves them out (its title
    counts them), every other character drawn in order; the prompt keeps them; the output shows
    one in a token as its code."""
    import re

    bidi = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        pane = app.main_screen.prompt_pane
        pane.text = BIDI_PROMPT
        await wait_for(pilot, lambda: "6 bidi controls not shown" in str(pane.border_title))
        editor = pane.editor
        drawn = ["".join(segment.text for segment in editor.render_line(y)) for y in range(editor.size.height)]
        assert not any(bidi.search(line) for line in drawn), drawn
        assert sum(bool(line.strip()) for line in drawn) >= 2, drawn  # it wraps
        assert all(len(line) == editor.size.width for line in drawn), drawn
        words = " ".join(drawn).split()
        assert words == bidi.sub("", BIDI_PROMPT).split(), drawn  # each word whole, every character there
        assert pane.text == BIDI_PROMPT  # the prompt (and its tokens) as typed
        stream = app.main_screen.stream
        stream.show_tokens([("say", "ar", 1), (" \u202eevil\u2069", "ar", 1)])
        await pilot.pause()
        laid_out = "".join(piece.text for line in stream._lines for piece in line)
        assert laid_out == "say ⟨U+202E⟩evil⟨U+2069⟩", laid_out
    from tui_decode.widgets.aligned_stream import shown_text  # the compare screen's streams

    assert shown_text(" \u202eevil\n") == " ⟨U+202E⟩evil↵"


async def test_an_error_that_reads_as_markup_keeps_the_session(tiny_spec, loader, tmp_path, monkeypatch):
    """A notification is markup in Textual: a family whose main is "org/[/x]" failed to load with
    an error line quoting it, a MarkupError that ended the app, the run and the prompt edit lost."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "families.toml").write_text('[families.odd]\nmain = "org/[/x]"\n')
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(config))
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        first = await run_and_wait(pilot, app)
        await pilot.press("escape", "f", "end", "enter")
        await wait_for(pilot, lambda: errors(app))
        await pilot.pause()
        assert "org/[/x]" in errors(app)[-1] and app.is_running and app.main_screen.result is first


async def test_a_label_that_reads_as_markup_opens_and_compares(tiny_spec, loader, tmp_path):
    """A saved run's label went into a pane's title, which is markup: "[/x]" ended the app."""
    from tui_decode.screens.compare_screen import CompareScreen

    def change(d):
        d["runs"]["method"]["label"] = "Spec [/x] run"
        d["runs"]["baseline"]["label"] = "base [/u]"

    path = saved_run(tmp_path, change)
    app = make_app(tiny_spec, loader, tmp_path, opened=RunResult.load(path), opened_name=path.name)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.set_up.is_set())
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.pause()
        assert app.is_running and not errors(app) and "Spec [/x] run" in screen_text(app)


async def test_ctrl_s_never_writes_over_a_run_another_session_just_saved(tiny_spec, loader, tmp_path, monkeypatch):
    """Two sessions saving in the same second chose the same name (each checked it was free, then
    replaced whatever was there): the first one's run was lost. The name is taken exclusively."""
    import tui_decode.screens.main.saving as saving

    runs = tmp_path / "runs"
    runs.mkdir()
    other = runs / "20261202-101010-ar.json"
    other.write_text("another session's run")
    monkeypatch.setattr(saving, "run_file_stem", lambda result, folder: "20261202-101010-ar")  # checked: free
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await run_and_wait(pilot, app)
        await pilot.press("escape", "ctrl+s")
        await wait_for(pilot, lambda: "saved" in app.main_screen.status.message or errors(app))
        assert not errors(app), errors(app)
    assert other.read_text() == "another session's run"
    assert RunResult.load(runs / "20261202-101010-ar-2.json").method.method == "ar"
    assert (runs / "20261202-101010-ar-2.svg").is_file()


async def test_two_exports_in_one_second_are_two_files(tiny_spec, loader, tmp_path, monkeypatch):
    """x on the compare screen named the file by the second: a second export then replaced the first."""
    import tui_decode.screens.compare_screen as compare
    from tui_decode.screens.compare_screen import CompareScreen

    monkeypatch.setattr(compare.time, "strftime", lambda fmt, *a: "20261202-101010")
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await run_and_wait(pilot, app)
        await pilot.press("escape", "c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.press("x", "x")
        await wait_for(pilot, lambda: len(list((tmp_path / "runs").glob("*-compare*.md"))) == 2)
        assert sorted(p.name for p in (tmp_path / "runs").glob("*.md")) == [
            "20261202-101010-compare-2.md", "20261202-101010-compare.md"]


@pytest.mark.parametrize("change,shown", [
    (lambda d: d["family"].update(helper="draft [/x] head", label="fam [bold]x"), "draft [/x] head"),
    (lambda d: d["family"].update(helper="5", device="{'gpu': [1]}", dtype=None), "· 5"),
    (lambda d: d.__setitem__("family", {}), "Speculative"),
    (lambda d: d["params"].update(self_draft="head", head={"path": 7}), "Speculative"),
    (lambda d: d["runs"]["method"].__setitem__("tok_iter", [10**9] * len(d["runs"]["method"]["tok_iter"])),
     "Speculative"),
])
async def test_an_opened_run_with_odd_family_or_extra_fields_is_shown(tiny_spec, loader, tmp_path, change, shown):
    """Family values are free-form text (label, helper, device, dtype; `FamilyInfo` refuses a value
    of another type in one line, tests/records/test_family_info.py): whatever a file holds there is
    shown as text, never read as markup; fields this version does not know are left alone."""
    path = saved_run(tmp_path, change)
    app = make_app(tiny_spec, loader, tmp_path, opened=RunResult.load(path), opened_name=path.name)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.set_up.is_set())
        await pilot.pause()
        assert app.is_running and not errors(app), errors(app)
        assert shown in screen_text(app)


@pytest.mark.parametrize("damage,message", [
    (lambda c: c.__setitem__("rope_theta", "big"), "rope_theta must be a number, got str"),
    (lambda c: c.__setitem__("num_attention_heads", 0), "num_attention_heads 0"),
    (lambda c: c.__setitem__("eagle_config", [1]), "eagle_config must be an object, got array"),
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


def warnings(app) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "warning"]


async def test_a_saved_run_whose_token_texts_disagree_with_its_ids_shows_the_ids(tmp_path):
    """Issue 40: a file whose ``tokens`` were edited opened showing its iterations' texts on the main
    screen and the edited ones in the history's compare, neither checked against the ids. The ids
    are the record: with no tokenizer to decode them, a token the file gives two texts shows as
    ``<id N>`` everywhere, and one notice says so."""
    from tui_decode.app import TuiDecodeApp
    from tui_decode.state.run_history import stream_tokens

    path = saved_run(tmp_path, lambda d: d["runs"]["method"]["tokens"].__setitem__(1, " slow"), name="edited.json")
    app = TuiDecodeApp(None, opened=RunResult.load(path), opened_name=path.name, runs_folder=tmp_path / "runs",
                       cursor_blink=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.set_up.is_set())
        await pilot.pause()
        notices = warnings(app)
        assert len(notices) == 1 and notices[0].startswith("edited.json: 1 token id(s) have two texts in the file "
                                                           "(id 2365: ' slow' and ' quick')"), notices
        result = app.main_screen.result
        assert app.main_screen.stream.texts[:3] == ["The", "<id 2365>", " brown"]
        assert [t for t, _, _ in stream_tokens(result.method)][:3] == ["The", "<id 2365>", " brown"]
        assert [t for t, _, _ in stream_tokens(result.baseline)][:3] == ["The", "<id 2365>", " brown"]
        assert result.method.ids[:3] == [504, 2365, 6354]  # the file's ids, as they were


async def test_a_saved_run_whose_token_texts_disagree_is_decoded_again_by_its_model(tiny_spec, loader, tmp_path):
    """With the model the run was made with loaded, ctrl+o decodes the file's ids again: the texts
    shown are the ids' own, whatever the file's ``tokens`` and emitted texts said."""
    from tui_decode.state.run_history import stream_tokens

    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=6)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        made = await run_and_wait(pilot, app)
        data = made.to_json()
        data["runs"]["method"]["tokens"][0] = "EDITED"
        data["runs"]["method"]["iters"][0]["emit"][0][1] = "EDITED"
        data["runs"]["method"]["text"] = "EDITED text"
        path = tmp_path / "edited.json"
        path.write_text(json.dumps(data))
        app.main_screen.open_path(path)
        await pilot.pause()
        notices = warnings(app)
        assert len(notices) == 1 and "decodes the ids" in notices[0] and "'EDITED'" in notices[0], notices
        shown = app.main_screen.result
        assert shown is not made and shown.method.ids == made.method.ids
        assert shown.method.tokens == made.method.tokens and shown.method.text == made.method.text
        assert app.main_screen.stream.texts == [t for t, _, _ in stream_tokens(made.method)]
