"""What the app's words and commands offer, as a new user reads them: words that never read as
cut off, a command offered only when it can do something, a key whose effect is said where it is
out of sight, a title without a file path. Saved runs are opened (no model) unless a run is needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from decoders.records.run import RunResult
from decoders.records.summary import Summary
from tests.app.test_app_layout import opened, screen_lines
from tui_decode.state.run_summary import summary_rows

pytestmark = pytest.mark.anyio

DATA = Path(__file__).parents[1] / "data"


def plain(renderable) -> str:
    """A rich renderable as plain text, wide enough that nothing wraps."""
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_the_finish_reason_reads_as_words_not_a_cut_off_label():
    """"20 in 17 iterations · eos" (or "· length") read as a label cut off."""
    app = opened("spec")
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        text = plain(app.main_screen.stats.figures.content)
        assert "20 in 17 iterations, stopped at end of text" in text, text
        assert "· eos" not in text
    assert dict(summary_rows(Summary(method="ar", finish="length")))["finished"] == "stopped at max tokens"
    assert RunResult.load(DATA / "run_spec.json").summary.finish == "eos"


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_d_shows_the_detail_full_screen_at_every_size(size):
    """At 200x60 (the wide layout's 45% detail) d filled half the terminal with hatching."""
    app = opened("pld")
    async with app.run_test(size=size) as pilot:
        main = app.main_screen
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        assert main.maximized is main.detail
        width, height = size
        assert main.detail.region.height >= height - 2, (main.detail.region, size)  # all but the footer
        assert not any("╱╱╱" in line for line in screen_lines(app))


@pytest.mark.parametrize("width", [120, 160, 200])
async def test_the_helps_formula_column_is_set_apart_from_the_meaning(width):
    """From 110 columns the formula has a column of its own, one space after the meaning: a
    meaning that filled its column ran into the formula ("measured once per context T(k) =
    median ...")."""
    from tui_decode.screens.help_screen import HelpRows, HelpScreen
    from tui_decode.state import help_text

    app = opened("spec")
    async with app.run_test(size=(width, 50)) as pilot:
        await pilot.pause()
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        figures = app.screen.query_one(".help-figures", HelpRows)
        lines = [line.plain for line in figures.lines(figures.content_size.width)]
        from rich.cells import cell_len

        rule = {cell_len(line[:line.index(" │ ")]) if " │ " in line else None for line in lines}
        assert len(rule) == 1 and None not in rule, lines  # one rule, in the same column on every line
        assert rule.pop() > figures.first + 20
        for figure in help_text.FIGURES:  # every formula in its column, right of the rule
            start = figure.formula.split()[0]
            assert any(line.split(" │ ", 1)[1].startswith(start) for line in lines), figure.formula


def test_the_lookup_detail_quotes_the_matched_ngram():
    """"matched 1-gram  with in the output so far": the token (" with") unquoted read as a double
    space and a stray word."""
    from rich.style import Style

    from tests.app.test_detail_views import drawn
    from tui_decode.widgets.details import DetailContext, view_for
    from tui_decode.widgets.iteration_detail import detail_of

    result = RunResult.load(DATA / "run_pld.json")
    context = DetailContext(method="pld", prompt=result.prompt, prompt_tokens=len(result.prompt_ids),
                            output_tokens=list(result.method.tokens))
    heads = []
    for it in result.method.iters:
        kind, detail = detail_of(it, "pld")
        if detail is not None:
            text = drawn(view_for(kind)(it, detail, context, lambda name: Style()))
            heads.append(next(line for line in text.splitlines() if line.startswith("matched ")))
    assert heads and all(re.match(r'matched \d+-gram "[^"]+" in ', head) for head in heads), heads
    quick = next(head for head in heads if "quick" in head)
    assert quick.startswith('matched 1-gram " quick" in the prompt;'), quick


@pytest.mark.parametrize("size, page, told", [((80, 24), "output", True), ((80, 24), "setup", False),
                                              ((140, 45), "setup", False)])
async def test_t_says_what_it_did_where_the_prompt_pane_is_out_of_sight(size, page, told):
    """t on the 80x24 Output page toggled the chat template unseen (the prompt pane, which says
    it, is on the Setup page)."""
    app = opened("spec")
    async with app.run_test(size=size, notifications=True) as pilot:
        main = app.main_screen
        await pilot.pause()
        main.show_page(page)
        main.params_pane.focus() if page == "setup" else main.stream.focus()
        await pilot.pause()
        before = main.settings.params.chat_template
        await pilot.press("t")
        await pilot.pause()
        assert main.settings.params.chat_template is not before
        said = [n.message for n in app._notifications]
        assert bool(said) is told, said
        if told:
            assert said == [f"Chat template {'on' if not before else 'off'}: the prompt goes as "
                            f"{'a user message' if not before else 'raw text'}."]


async def test_the_palette_offers_cancel_only_when_something_can_be_cancelled(tiny_spec, tiny_family, tmp_path):
    """The command palette offered "Cancel run" with nothing running."""
    import threading

    from tests.support.app import make_app, wait_for

    release = threading.Event()

    def slow_load(spec, progress):
        release.wait(30)
        return tiny_family

    app = make_app(tiny_spec, slow_load, tmp_path)
    async with app.run_test(size=(140, 45)) as pilot:
        main = app.main_screen
        await pilot.pause()

        def titles() -> set[str]:
            return {command.title for command in app.get_system_commands(app.screen)}

        try:
            assert "Cancel run" not in titles() and "Run" in titles()
            await pilot.press("ctrl+r")  # waits for the model: escape (or the palette) cancels that
            await pilot.pause()
            assert main.run_after_load and "Cancel run" in titles()
            await pilot.press("escape")
            await pilot.pause()
            assert not main.run_after_load and "Cancel run" not in titles()
        finally:
            release.set()
        await wait_for(pilot, lambda: main.loaded is not None)
        assert "Cancel run" not in titles()


HEAD_PATH = "/home/someone/.cache/tui-decode/heads/smollm2-135m"


async def test_the_output_title_names_the_draft_not_its_file_path():
    """A run drafted by a trained head was titled "Output · Speculative (greedy, γ=4) · ptd head
    /home/someone/.cache/tui-decode/heads/smollm2-135m"."""
    import msgspec.structs

    from tui_decode.app import TuiDecodeApp
    from tui_decode.state.run_summary import run_title

    result = RunResult.load(DATA / "run_spec.json")
    result = msgspec.structs.replace(result, family=msgspec.structs.replace(result.family, helper=f"ptd head {HEAD_PATH}"))
    assert run_title(result) == f"{result.method.label} · ptd head smollm2-135m"
    app = TuiDecodeApp(None, opened=result, opened_name="run.json", runs_folder=Path("/nonexistent"),
                       cursor_blink=False)
    async with app.run_test(size=(200, 60)) as pilot:
        main = app.main_screen
        await pilot.pause()
        title = str(main.stream.border_title)
        assert "ptd head smollm2-135m" in title and "/home" not in title, title
        assert "/home" not in "\n".join(screen_lines(app))


async def test_the_sweep_plot_scales_its_axis_to_the_points_with_break_even_marked():
    """The axis ran from 0 to 1.1x: measured points of 0.86x-0.97x sat within a row or two of
    break-even, indistinguishable. It spans the data (break-even included, marked)."""
    from textual.app import App

    from tui_decode.widgets.gamma_plot import GammaPlot, PlotData, Point

    speeds = [0.86, 0.90, 0.93, 0.97]
    data = PlotData([], None, 1, [Point(k, s, 0.02) for k, s in enumerate(speeds, 1)], "k")

    class PlotApp(App[None]):
        CSS = "GammaPlot { height: 16; width: 60; }"

        def compose(self):
            yield GammaPlot(id="plot")

    app = PlotApp()
    async with app.run_test(size=(70, 20)) as pilot:
        plot = app.query_one(GammaPlot)
        plot.plot(data)
        await pilot.pause()
        lines = [line.text for line in plot.render_lines(plot.region.reset_offset)]
    marked = [(n, line.index("●")) for n, line in enumerate(lines) if "┤" in line and "●" in line]
    assert len(marked) == 4, lines
    by_column = sorted(marked, key=lambda rc: rc[1])  # left to right: k = 1 .. 4
    first, last = by_column[0][0], by_column[-1][0]
    assert first - last >= 4, "\n".join(lines)  # 0.86x well below 0.97x
    even = next(n for n, line in enumerate(lines) if line.lstrip().startswith("1.00x┤"))
    assert even < last and "┈" in lines[even]  # break-even marked, above every point


def helperless(tiny_family):
    """A loader whose family drafts with nothing, as a llama.cpp family without a GGUF helper:
    no helper model, no early exit (llama.cpp runs the whole model), no torch-built self-draft."""
    import dataclasses

    family = dataclasses.replace(tiny_family, helper=None, helper_source=None, main_model=None, backend="llamacpp")
    return lambda spec, progress: family


async def test_a_family_that_cannot_draft_is_not_offered_speculative_decoding(tiny_spec, tiny_family, tmp_path):
    """On the llama.cpp family Speculative was offered (the default method, m, the palette) with no
    draft, and ctrl+r failed naming a command-line flag ("give --helper FILE.gguf")."""
    from tests.support.app import make_app, wait_for

    app = make_app(tiny_spec, helperless(tiny_family), tmp_path, method="spec")
    async with app.run_test(size=(140, 45), notifications=True) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        await pilot.pause()
        assert main.settings.params.method == "pld"  # the default speculative run cannot run here
        assert "ctrl+r runs Prompt lookup (speculative decoding needs a draft model" in main.status.message
        seen = set()
        for _ in range(6):
            await pilot.press("m")
            seen.add(main.settings.params.method)
        assert seen == {"ar", "pld", "jacobi", "lookahead", "suffix"}
        titles = {command.title for command in app.get_system_commands(app.screen)}
        assert "Method: Speculative" not in titles and "Method: Jacobi" in titles
        main.set_method("spec")  # (a saved run's settings, say)
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert not main.running
        said = [n.message for n in app._notifications if n.severity == "error"]
        assert said and "has no draft model, so speculative decoding cannot run on it" in said[-1], said
        assert "--" not in said[-1] and "m changes the method" in said[-1] and "(f)" in said[-1]
        await pilot.press("s")
        await pilot.pause()
        assert app.screen is main and len([n for n in app._notifications if n.severity == "error"]) == 2


async def test_a_longer_status_message_takes_the_lines_it_needs():
    """At 80x24 the ready line with the load-time choice (three lines) showed its first line or
    two: the status line kept the height of the message before it."""
    app = opened("spec")
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await pilot.pause()
        main.status.set("ready", "idle")
        await pilot.pause()
        message = ("ready: SmolLM2-135M-Instruct (Q4_1 GGUF, bundled) on cpu · float16 weights, float32 activations; "
                   "ctrl+r runs Speculative · measured here: float16 weights, int4 self-draft drafts (predicted "
                   "1.24x at γ 3)")
        main.status.set(message, "idle")
        await pilot.pause()
        shown_text = " ".join(" ".join(screen_lines(app)[-4:-1]).split())
        assert message in shown_text, screen_lines(app)[-5:]
        main.status.set("done", "done")
        await pilot.pause()
        assert main.status.region.height == 1
