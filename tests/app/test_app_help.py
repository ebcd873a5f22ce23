"""The help screen (F1, ?): every figure with its formula, every colour of the panes, the keys;
and every label the statistics pane shows has its entry (the help is data a tooltip can reuse)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Group
from rich.table import Table

from decoders.models.families import BUILTIN_FAMILIES
from decoders.records.run import RunResult
from tui_decode.app import TuiDecodeApp
from tui_decode.screens import HelpScreen
from tui_decode.screens.help_screen import HelpRows
from tui_decode.state import help_text
from tui_decode.widgets import PromptEditor

pytestmark = pytest.mark.anyio

DATA = Path(__file__).parents[1] / "data"
SIZE = (120, 36)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def opened_app(method: str) -> TuiDecodeApp:
    name = f"run_{method}.json"
    return TuiDecodeApp(BUILTIN_FAMILIES["smollm2-135m"], opened=RunResult.load(DATA / name), opened_name=name,
                        runs_folder=Path("/nonexistent/runs"), cursor_blink=False)


def stats_labels(app: TuiDecodeApp) -> list[str]:
    """The labels of the rows the statistics pane shows (the headline's, then the figures')."""
    tables = []
    for widget in (app.main_screen.stats.headline, app.main_screen.stats.figures):
        content = widget.content
        tables += [r for r in content.renderables if isinstance(r, Table)] if isinstance(content, Group) else \
            [content] if isinstance(content, Table) else []
    return [str(cell) for table in tables for cell in table.columns[0]._cells]


async def test_f1_opens_the_help_with_every_formula_and_escape_closes_it():
    app = opened_app("spec")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.plain_text()
        for line in ("τ = tokens / target forwards",
                     "α = accepted / judged drafts",
                     "α̂ = mean over positions of Σₓ min(p(x), q(x))",
                     "ĉ = mean helper forward ms / mean target one-token forward ms",
                     "T(k) = median k-token forward / median one-token forward",
                     "S = (1 − α^(γ+1)) / ((1 − α)(γ·c + 1))",
                     "S_T = (1 − α^(γ+1)) / ((1 − α)(γ·c + T(γ+1)))",
                     "1 + accepted / drafts",
                     "a_i = drafts with token i accepted / drafts",
                     "S_wall = t_baseline(N) / t_method(N)",
                     "± = speedup · √((2·jitter·√(1/N_base + 1/N_iter))² + (2·|change − 1| / N_iter)²)",
                     "ttft = end of iteration 0 − start",
                     "(t_end(last) − t_end(first)) / tokens after the first iteration",
                     "red struck through", "a draft token the target rejected",
                     "not judged: after the first rejection",
                     "accepted draft", "bonus", "break-even", "a measured run (the run, or each value of a sweep, s)", "token tree",
                     "the first position where the two streams part",
                     "pool hit rate"):  # a method's own figure, from its declaration
            assert line in text, line
        await pilot.press("escape")
        assert app.screen is app.main_screen


async def test_question_mark_opens_the_help_but_stays_text_in_the_prompt():
    app = opened_app("ar")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")  # closes it again
        assert app.screen is app.main_screen
        await pilot.press("e")
        assert isinstance(app.focused, PromptEditor)
        app.main_screen.prompt_pane.text = ""
        await pilot.press("question_mark")
        assert app.main_screen.prompt_pane.text == "?" and app.screen is app.main_screen


@pytest.mark.parametrize("method", ["ar", "spec", "pld", "jacobi"])
async def test_every_label_of_the_statistics_pane_has_its_help(method):
    app = opened_app(method)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        labels = stats_labels(app)
    assert len(labels) >= 5
    missing = [label for label in labels if help_text.figure_help(label) is None]
    assert not missing, f"no help for {missing}; add them to tui_decode/help_text.py"
    assert help_text.tooltip(labels[0]).startswith(help_text.figure_help(labels[0]).meaning)


def test_help_screen_snapshot(snap_compare):
    """F1 over a speculative run: the figures, each with its sentence and formula."""
    assert snap_compare(opened_app("spec"), press=["f1"], terminal_size=SIZE)


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_help_reads_at_80_columns_and_keeps_its_formula_column_when_wide(size):
    """At 80x24 the sentences had 13 columns ("end-of-sequen / ce token") beside a mostly empty
    formula column: there the formula goes under its sentence; at 120 it keeps a column of its own."""
    app = opened_app("spec")
    async with app.run_test(size=size) as pilot:
        await pilot.press("f1")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        figures = screen.query_one(".help-figures", HelpRows)
        width = figures.content_size.width
        lines = [line.plain for line in figures.lines(width)]
        assert max(cell_len(line.rstrip()) for line in lines) <= width
        at = next(i for i, line in enumerate(lines) if "Tokens per target forward" in line)
        column = lines[at].index("Tokens per target forward")
        formula = "τ = tokens / target forwards"
        if size[0] == 80:  # under its sentence, indented like it; the sentence keeps the width
            assert width - column >= 45
            below = next(line for line in lines[at + 1:] if formula in line)
            assert below.index(formula) == column
        else:  # beside it
            assert lines[at].index(formula) > column + 50
        text = "\n".join(screen_lines(app))
        assert "end-of-sequence" in text  # the first sentence, whole words on the screen


async def test_the_help_is_a_handful_of_widgets_so_f1_answers_at_once():
    """With a widget per cell the help was 251 widgets: F1 took 1.7 s of the UI thread to build and
    lay them out (3.5 s on a loaded machine). Each section's rows are now one widget."""
    app = opened_app("spec")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert len(app.screen.query("*")) <= 30


def test_help_screen_snapshot_80x24(snap_compare):
    """F1 at 80x24: each formula under its sentence, the sentences the width of the dialog."""
    assert snap_compare(opened_app("spec"), press=["f1"], terminal_size=(80, 24))
