"""Keyboard flows through the app on a tiny random model (real decoding, milliseconds per token):
change gamma and run, cancel mid-run, switch method, bad parameters, families that fail to load,
saving and opening runs, quitting mid-run."""

from __future__ import annotations

import shutil
import time

import pytest

from decoders.core.events import PhaseStarted
from decoders.engine import Engine
from decoders.models.family import FamilySpec
from decoders.records.run import Iteration, RunResult
from tests.support.app import DATA, PROMPT, SIZE, PacedEngine, errors, make_app, run_and_wait, wait_for
from tui_decode.app import TuiDecodeApp
from tui_decode.widgets import IterationDetail, PromptEditor

pytestmark = pytest.mark.anyio

async def test_change_gamma_and_run_reuses_models_and_baseline(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        assert app.main_screen.settings.draft_layer == 2  # two thirds up the tiny model's 3 layers
        await pilot.press("right_square_bracket")  # gamma 4 -> 5
        assert app.main_screen.settings.params.gamma == 5
        first = await run_and_wait(pilot, app)
        assert first.params["gamma"] == 5 and first.method.method == "spec"
        assert first.family.helper == "early exit @ layer 2"
        assert app.main_screen.table.row_count == len(first.method.iters)
        assert app.main_screen.stream.token_count == len(first.method.ids) == first.summary.tokens
        assert app.main_screen.status.state == "done"

        await pilot.press("left_square_bracket", "left_square_bracket")  # gamma 5 -> 3
        second = await run_and_wait(pilot, app)
        assert second.params["gamma"] == 3
        # each run decoded its own baseline alongside it (interleaved): none cached, the same tokens
        assert app.main_screen.loaded.engine.baselines_measured == 0
        assert first.summary.pairing == second.summary.pairing == "interleaved"
        assert loader.calls == ["tiny"]  # and the models loaded once
        assert second.baseline.ids == first.baseline.ids


async def test_escape_cancels_mid_run_and_the_partial_run_stays(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=PacedEngine, method="ar", max_new_tokens=64)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.main_screen.table.row_count >= 3)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.main_screen.running)
        await pilot.pause()
        result = app.main_screen.result
        assert result is not None and result.method.finish == "cancelled"
        assert 3 <= len(result.method.ids) < 64
        assert app.main_screen.stream.token_count == len(result.method.ids)
        assert app.main_screen.table.row_count == len(result.method.iters)
        assert app.main_screen.status.state == "cancelled" and "partial run stays" in app.main_screen.status.message
        assert "(cancelled)" in str(app.main_screen.stream.border_title)


async def test_m_switches_method_and_the_run_uses_it(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="spec")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await pilot.press("m")
        assert app.main_screen.settings.params.method == "pld"
        assert [k.key for k in app.main_screen.params_pane.rows][-4:] == ["num_pred", "ngram_max", "ngram_min", "draft_policy"]
        result = await run_and_wait(pilot, app)
        assert result.method.method == "pld"
        assert "Prompt lookup" in str(app.main_screen.stream.border_title)
        await pilot.press("m")
        result = await run_and_wait(pilot, app)
        assert result.method.method == "jacobi"
        assert result.summary.identical is True


async def test_bad_parameters_notify_and_keep_the_previous_run(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="pld")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        previous = await run_and_wait(pilot, app)
        rows = app.main_screen.table.row_count

        app.main_screen.prompt_pane.text = "   "
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert any("the prompt is empty" in m for m in errors(app))
        assert app.main_screen.result is previous and app.main_screen.table.row_count == rows and not app.main_screen.running

        app.main_screen.prompt_pane.text = PROMPT
        app.main_screen.params_pane.select_key("ngram_min")
        await pilot.press("right", "right", "right")  # n-gram min 1 -> 4, above n-gram max 3
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert any("ngram_min (4) is larger than ngram_max (3)" in m for m in errors(app))
        assert app.main_screen.result is previous and app.main_screen.status.state == "error"

        # the engine's own check, in the worker: a prompt beyond the tiny model's 128 positions
        await pilot.press("left", "left", "left")
        app.main_screen.prompt_pane.text = "w10 " * 200
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not app.main_screen.running and len(errors(app)) == 3)
        assert "context" in errors(app)[-1]
        assert app.main_screen.result is previous and app.main_screen.table.row_count == rows


async def test_letters_typed_in_the_prompt_stay_text(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("e")
        assert isinstance(app.focused, PromptEditor)
        app.main_screen.prompt_pane.text = ""
        await pilot.press("m", "g", "t", "f")
        assert app.main_screen.prompt_pane.text == "mgtf"
        assert app.main_screen.settings.params.method == "spec" and app.main_screen.settings.params.mode == "greedy"
        assert app.main_screen.settings.params.chat_template is True and len(app.screen_stack) == 1


async def test_a_family_that_fails_to_load_leaves_the_previous_one_usable(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        before = app.main_screen.loaded
        await pilot.press("f")
        assert app.screen.__class__.__name__ == "Picker"
        await pilot.press("down", "enter")  # the second family: a hub model, unreachable here
        await wait_for(pilot, lambda: not app.main_screen.loading_family and errors(app))
        assert "could not be reached" in errors(app)[-1]
        assert app.main_screen.loaded is before and app.main_screen.spec.name == "tiny"
        result = await run_and_wait(pilot, app)
        assert result.method.finish in ("length", "eos")


async def test_save_then_open_the_run_again(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="jacobi", max_new_tokens=12)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("ctrl+s")  # nothing to save yet
        assert any("Nothing to save" in n.message for n in app._notifications)
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        result = await run_and_wait(pilot, app)
        await pilot.press("ctrl+s")
        await pilot.pause()
        saved = sorted((tmp_path / "runs").iterdir())
        assert [p.suffix for p in saved] == [".json", ".svg"]
        assert str(tmp_path / "runs") in app.main_screen.status.message
        assert RunResult.load(saved[0]).method.ids == result.method.ids
        assert "Jacobi" in saved[1].read_text()

        await pilot.press("m")  # show something else, then open the saved run from the picker
        await pilot.press("ctrl+o", "enter")
        await pilot.pause()
        assert app.main_screen.settings.params.method != "jacobi"  # edited: it asks first
        await pilot.press("down", "enter")  # open it anyway
        await pilot.pause()
        assert app.main_screen.result.method.ids == result.method.ids and app.main_screen.settings.params.method == "jacobi"
        assert app.main_screen.status.message == f"opened {saved[0].name}"


async def test_ctrl_o_asks_before_it_replaces_edited_parameters(tmp_path):
    """A saved run shows its own prompt and parameters: with edits not yet run, ctrl+o asks, and
    keeping them (enter on the first answer, or escape) leaves them and the screen as they were."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(DATA / "run_spec.json", runs / "saved.json")
    app = TuiDecodeApp(None, runs_folder=runs, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await pilot.pause()
        await pilot.press("ctrl+o", "enter")  # nothing edited: it opens at once
        await pilot.pause()
        assert main.result is not None and main.status.message == "opened saved.json"
        opened = main.result
        main.params_pane.select_key("seed")
        await pilot.press("7", "enter")  # an edit, not run
        assert main.settings.params.seed == 7
        await pilot.press("ctrl+o", "enter")
        await pilot.pause()
        assert "edited" in app.screen.query_one(".picker-title").render().plain
        await pilot.press("enter")  # keep my edits
        await pilot.pause()
        assert app.screen is main and main.settings.params.seed == 7 and main.result is opened
        await pilot.press("ctrl+o", "enter", "escape")  # escape keeps them too
        await pilot.pause()
        assert app.screen is main and main.settings.params.seed == 7
        await pilot.press("ctrl+o", "enter", "down", "enter")  # open it anyway
        await pilot.pause()
        assert main.settings.params.seed == opened.params["seed"] and main.result is not opened


async def test_open_a_saved_run_without_any_model(tmp_path):
    result = RunResult.load(DATA / "run_spec.json")
    spec = FamilySpec(name="never-loaded", main="/nonexistent")
    app = TuiDecodeApp(spec, opened=result, opened_name="run_spec.json", runs_folder=tmp_path, cursor_blink=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        assert not app.main_screen.loading_family and app.main_screen.loaded is None
        assert app.main_screen.table.row_count == len(result.method.iters)
        assert app.main_screen.stream.token_count == len(result.method.ids)
        assert app.main_screen.prompt_pane.text == result.prompt
        assert app.main_screen.settings.params.gamma == result.params["gamma"]
        assert "opened run_spec.json" in app.main_screen.status.message

        # the cursor in the output selects the iteration of the token under it
        app.main_screen.stream.focus()
        await pilot.press("end")
        assert app.main_screen.table.cursor_row == result.method.tok_iter[-1]
        await pilot.press("home", "right", "right", "right")
        assert app.main_screen.table.cursor_row == result.method.tok_iter[3]
        assert app.main_screen.detail.iteration.k == result.method.tok_iter[3]

        # enter on a table row opens its detail full screen; escape returns
        app.main_screen.table.focus()
        await pilot.press("down", "enter")
        assert isinstance(app.screen.maximized, IterationDetail)
        await pilot.press("escape")
        assert app.screen.maximized is None


async def test_ctrl_q_quits_at_once_mid_run(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=PacedEngine, method="ar", max_new_tokens=96)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.main_screen.table.row_count >= 2)
        started = time.monotonic()
        await pilot.press("ctrl+q")
    assert time.monotonic() - started < 2.0
    assert app.return_code == 0 and app.main_screen.result is None  # it left before the run could finish


async def test_every_action_is_in_the_command_palette(tmp_path):
    app = TuiDecodeApp(None, runs_folder=tmp_path, cursor_blink=False)
    async with app.run_test(size=SIZE):
        titles = {command.title for command in app.get_system_commands(app.screen)}
    for title in ("Run", "Save run", "Open a saved run", "Switch model family", "Statistics",
                  "Method: Speculative", "Toggle greedy / sampling", "Longer draft", "Toggle chat template"):
        assert title in titles
    assert "Cancel run" not in titles  # nothing runs: nothing to cancel (see test_app_labels_and_offers)


def test_run_app_opens_a_saved_run(tmp_path, monkeypatch):
    """`tui-decode --open RUN.json` reaches the app with the run loaded and the family resolved."""
    from tui_decode import app as app_module
    from tui_decode.cli.main import build_parser, cmd_app

    shutil.copy(DATA / "run_ar.json", tmp_path / "run.json")
    seen = {}

    def fake_run(self):
        seen["opened"] = self.opened
        seen["spec"] = self.spec
        return 0

    monkeypatch.setattr(app_module.TuiDecodeApp, "run", fake_run)
    args = build_parser().parse_args(["--open", str(tmp_path / "run.json")])
    assert cmd_app(args) == 0
    assert seen["opened"].method.method == "ar" and seen["spec"].name == "smollm2-135m"


def test_run_app_with_a_missing_run_file_is_one_line_exit_2(tmp_path, capsys):
    from tui_decode.cli.main import main

    assert main(["--open", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "cannot read the saved run" in err and "it does not exist" in err and err.count("\n") == 1


class OutOfMemoryEngine(Engine):
    """Fails the way a device does when a run does not fit, after the baseline phase began."""

    def stream(self, prompt, params, cancelled=lambda: False, idle=None):
        for event in super().stream(prompt, params, cancelled, idle):
            if isinstance(event, Iteration):
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            yield event


async def test_out_of_memory_is_a_notification_and_the_run_shown_stays(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=OutOfMemoryEngine, method="pld")
    app.opened = RunResult.load(DATA / "run_pld.json")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        shown = app.main_screen.result
        await pilot.press("ctrl+r")  # loads the tiny family on demand, then runs
        await wait_for(pilot, lambda: not app.main_screen.running and not app.main_screen.loading_family and errors(app))
        assert errors(app)[-1].startswith("out of memory (CUDA out of memory")
        assert app.main_screen.result is shown and app.main_screen.table.row_count == len(shown.method.iters)
        assert app.main_screen.status.state == "error"


async def test_changing_the_theme_redraws_the_run(tmp_path):
    result = RunResult.load(DATA / "run_spec.json")
    app = TuiDecodeApp(None, opened=result, opened_name="run_spec.json", runs_folder=tmp_path, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        app.main_screen.table.select_iteration(5)
        await pilot.pause()
        app.theme = "textual-light"
        await pilot.pause()
        assert app.main_screen.table.row_count == len(result.method.iters) and app.main_screen.table.cursor_row == 5
        assert app.main_screen.detail.iteration.k == 5


async def test_escape_leaves_the_prompt_for_the_parameters(tmp_path):
    app = TuiDecodeApp(None, runs_folder=tmp_path, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("e")
        assert isinstance(app.focused, PromptEditor)
        await pilot.press("escape")
        assert app.focused is app.main_screen.params_pane
        await pilot.press("m")  # letters are keys again
        assert app.main_screen.settings.params.method == "pld"


async def test_the_screen_stays_usable_while_a_family_loads(tiny_spec, tiny_family, tmp_path):
    """Loading a family is shown in the status line only: no loading cover over the screen, and
    the keys keep working."""
    import threading

    release = threading.Event()

    def slow_load(spec, progress):
        release.wait(10)
        return tiny_family

    app = make_app(tiny_spec, slow_load, tmp_path, method="ar")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loading_family)
        await pilot.pause(0.1)
        assert "Parameters" in app.export_screenshot()  # the panes, not a loading cover
        app.main_screen.params_pane.focus()
        await pilot.press("m", "down")
        assert app.main_screen.params_pane.selected == 1
        assert app.main_screen.settings.params.method == "spec"
        release.set()
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)


async def test_the_iteration_detail_says_why_an_adaptive_draft_stopped():
    from textual.app import App

    from decoders.records.run import Emitted, Iteration
    from tui_decode.widgets.details import DetailContext

    class Holder(App):
        def compose(self):
            yield IterationDetail()

    def text(detail) -> str:
        import io

        from rich.console import Console

        console = Console(width=200, record=True, file=io.StringIO())
        console.print(detail.body.content)
        return console.export_text()

    app = Holder()
    async with app.run_test(size=(100, 20)) as pilot:
        detail = app.query_one(IterationDetail)
        plain = Iteration(k=3, pos=10, draft=[], emit=[Emitted(5, "w5", "ar")], draft_stop="skip")
        detail.show(plain, DetailContext(method="spec"))
        await pilot.pause()
        assert "A plain step: one target forward, one token, nothing drafted: at this run's acceptance and " \
            "helper cost a plain step is cheaper." in " ".join(text(detail).split())
        assert "draft length" not in text(detail)  # no draft length beside "nothing drafted"
        detail.show(Iteration(k=4, pos=11, draft=[], emit=[Emitted(6, "w6", "ar")]), DetailContext(method="ar"))
        await pilot.pause()
        assert "draft length" not in text(detail) and "A plain step" in text(detail)


class SlowBaselineEngine(Engine):
    """A real engine whose baseline phase pauses at each token, so a test can cancel it there:
    paired sequentially, as a backend that cannot run a second cache is."""

    pause = 0.1  # long enough that a loaded machine still shows the baseline phase to the test

    def __init__(self, family, clock=None):
        super().__init__(family, clock, pairing="sequential")

    def stream(self, prompt, params, cancelled=lambda: False, idle=None):
        for event in super().stream(prompt, params, cancelled, idle):
            if getattr(event, "phase", None) == "baseline" and not isinstance(event, PhaseStarted):
                time.sleep(self.pause)
            yield event


async def test_cancelling_in_the_baseline_says_what_stays_shown(tiny_spec, loader, tmp_path):
    """Escape during the baseline: with no run before there is nothing to keep, and the status line
    says so; after a run it says that run stays (and it does)."""
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=SlowBaselineEngine, method="spec", max_new_tokens=24)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)

        async def cancel_in_the_baseline():
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: main.live is not None and main.live.phase == "baseline"
                           and main.live.progress_tokens >= 2)
            await pilot.press("escape")
            await wait_for(pilot, lambda: not main.running)
            await pilot.pause()

        await cancel_in_the_baseline()
        assert main.result is None and main.status.state == "cancelled"
        assert main.status.message == "cancelled during the baseline; no run is shown yet (ctrl+r runs)"

        first = await run_and_wait(pilot, app)
        await pilot.press("right_square_bracket")  # another draft length: the baseline is reused ...
        main.prompt_pane.text = PROMPT + " w30"  # ... but not for another prompt
        await cancel_in_the_baseline()
        assert main.result is first
        assert main.status.message == "cancelled during the baseline; the run shown before stays"


async def test_a_registered_method_reaches_the_app_with_no_edit(tiny_spec, loader, tmp_path):
    """The test-only method (`tests.support.lookback`): `m` reaches it after the built-in ones, its
    parameter is a knob of the parameters pane, and a run uses it."""
    from decoders.core.declarations import Method, register, unregister
    from tests.support.lookback import SPAN, lookback

    register(Method(name="lookback", label="Lookback", run=lookback, params=(SPAN,), greedy_only=True,
                    detail="echo", draft_length="span", order=200))
    try:
        app = make_app(tiny_spec, loader, tmp_path, method="suffix", max_new_tokens=12)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await wait_for(pilot, lambda: app.main_screen.loaded is not None)
            await pilot.press("m")
            assert app.main_screen.settings.params.method == "lookback"
            assert [k.key for k in app.main_screen.params_pane.rows][-1:] == ["span"]
            result = await run_and_wait(pilot, app)
            assert result.method.method == "lookback" and result.summary.identical is True
            assert "Lookback" in str(app.main_screen.stream.border_title)
    finally:
        unregister("lookback")
