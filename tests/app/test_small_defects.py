"""Small defects of issue 36, each seen by a new user: words that read as cut off, a command
offered when it can do nothing, a key whose effect is out of sight, a title that carries a file
path. Saved runs are opened (no model) unless a run is needed."""

from __future__ import annotations

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
