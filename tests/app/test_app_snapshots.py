"""Snapshots of the app's screens, from runs recorded by `scripts/record_runs.py` with a fixed
clock: the main screen after a finished run of each method, an iteration's detail, an error
notification, and the parameters pane. No model is loaded; the cursor does not blink.

Update the baselines after an intended change with `pytest tests/test_app_snapshots.py
--snapshot-update` and look at the report before committing them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from decoders.models.families import BUILTIN_FAMILIES
from decoders.records.run import RunResult
from tui_decode.app import TuiDecodeApp

DATA = Path(__file__).parents[1] / "data"
SIZE = (140, 45)


def opened_app(method: str) -> TuiDecodeApp:
    """The app as `tui-decode --open tests/data/run_<method>.json` shows it."""
    name = f"run_{method}.json"
    return TuiDecodeApp(BUILTIN_FAMILIES["smollm2-135m"], opened=RunResult.load(DATA / name), opened_name=name,
                        runs_folder=Path("/nonexistent/runs"), cursor_blink=False)


@pytest.mark.parametrize("method", ["ar", "spec", "pld", "jacobi"])
def test_main_screen_after_a_finished_run(snap_compare, method):
    assert snap_compare(opened_app(method), terminal_size=SIZE)


def test_iteration_detail_speculative(snap_compare):
    """Enter on a table row shows that iteration's top-5 p and q bars full screen."""

    async def pick_row(pilot):
        pilot.app.main_screen.table.focus()

    assert snap_compare(opened_app("spec"), press=["down", "down", "down", "enter"], terminal_size=SIZE,
                        run_before=pick_row)


def test_iteration_detail_prompt_lookup(snap_compare):
    """The matched n-gram, highlighted where it was found."""

    async def pick_row(pilot):
        pilot.app.main_screen.table.focus()

    assert snap_compare(opened_app("pld"), press=["down", "down"], terminal_size=SIZE, run_before=pick_row)


def test_error_notification_keeps_the_run(snap_compare):
    """An empty prompt: an error toast, the status line says why, the run stays on screen."""

    async def empty_prompt(pilot):
        pilot.app.main_screen.prompt_pane.text = ""

    assert snap_compare(opened_app("jacobi"), press=["ctrl+r"], terminal_size=SIZE, run_before=empty_prompt)


def test_parameters_pane_after_keys(snap_compare):
    """m switches to prompt lookup's rows; ↓ ↓ ↓ → raises the n-gram max; ] raises k."""
    assert snap_compare(opened_app("ar"), press=["m", "m", "down", "down", "down", "down", "down", "down", "down", "right",
                                                 "right_square_bracket"], terminal_size=SIZE)


def test_narrow_80x24_setup_page(snap_compare):
    """Below 120 columns one page at a time: the prompt and the parameters first; the footer keeps
    the keys that fit, each readable."""
    assert snap_compare(opened_app("spec"), terminal_size=(80, 24))


def test_narrow_80x24_output_page(snap_compare):
    """The page tabs (shift+tab twice from the parameters, → for the next page): the output with
    all four token kinds in its legend, and the iterations."""
    assert snap_compare(opened_app("spec"), press=["shift+tab", "shift+tab", "right"], terminal_size=(80, 24))


def test_wide_200x60_gives_the_detail_room(snap_compare):
    """From 180 columns: a wider parameters column, the drafts uncut, a taller iteration detail."""
    assert snap_compare(opened_app("pld"), terminal_size=(200, 60))


def test_typing_a_parameter_value(snap_compare):
    """A digit on a number's row opens the input; an out-of-range value says its bound."""

    async def pick_gamma(pilot):
        pilot.app.main_screen.params_pane.select_key("gamma")

    assert snap_compare(opened_app("spec"), press=["4", "0"], terminal_size=SIZE, run_before=pick_gamma)


def test_synthetic_figure_of_the_batch_screen(snap_compare):
    """The batch screen's synthetic figure (`tui_decode.widgets.synthetic_plot`) drawing fixed cells:
    a panel per batch size, both predictions and the measured points per α, break-even marked."""
    from tests.support.synthetic_rows import FigureApp

    assert snap_compare(FigureApp(), terminal_size=(110, 36))
