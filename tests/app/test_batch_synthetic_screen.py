"""The batch screen's synthetic grid (b, issue 39): a third field runs the synthetic draft's cells
at each batch size on the loaded family, beside autoregressive decoding, in rows of their own (never
among the table's), drawn measured against both predictions per α with the within-10% counts;
escape cancels, ctrl+s saves them with the rest; bad grid text is one line, nothing lost."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from decoders.bench.batch_figure import within
from tests.support.app import make_app, wait_for
from tests.support.synthetic_rows import FigureApp
from tui_decode.screens.batch_screen import BatchScreen
from tui_decode.state.batch_plan import GRID_HINT
from tui_decode.widgets.synthetic_plot import SyntheticPlot

pytestmark = pytest.mark.anyio
SIZE = (140, 45)


def shown(screen, selector: str) -> str:
    widget = screen.query_one(selector)
    return "\n".join(line.text for line in widget.render_lines(widget.region.reset_offset))


async def open_batch(pilot, app) -> BatchScreen:
    await wait_for(pilot, lambda: app.main_screen.loaded is not None)
    await pilot.press("b")
    assert isinstance(app.screen, BatchScreen)
    return app.screen


async def type_into(pilot, screen, selector: str, text: str) -> None:
    field = screen.query_one(selector, Input)
    field.value = text
    field.focus()
    await pilot.pause()


async def test_the_grid_runs_at_each_batch_size_apart_from_the_rows_and_is_drawn(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="pld", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_batch(pilot, app)
        grid = screen.query_one("#batch-grid", Input)
        assert grid.value == "" and grid.placeholder == GRID_HINT and "0.5,0.7,0.9:1..8" in GRID_HINT
        assert not screen.query_one("#batch-synthetic", SyntheticPlot).display  # nothing to draw yet
        await type_into(pilot, screen, "#batch-sizes", "1,2")
        await type_into(pilot, screen, "#batch-methods", "")  # the grid alone, autoregressive decoding beside it
        await type_into(pilot, screen, "#batch-grid", "0.9,0.5:1..2")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.running, timeout=120)
        await pilot.pause()
        assert screen.error is None and screen.report is not None
        assert [(r.method, r.batch) for r in screen.rows] == [("ar", 1), ("ar", 2)]  # no synthetic row among them
        assert [(c.batch, c.alpha, c.gamma) for c in screen.synthetic] == [
            (b, a, g) for b in (1, 2) for a in (0.5, 0.9) for g in (1, 2)]
        assert all(c.synthetic and c.identical and c.cost == 0.0 for c in screen.synthetic)
        assert "synthetic" not in shown(screen, "#batch-table") and shown(screen, "#batch-crossover").strip() == ""
        plot = screen.query_one("#batch-synthetic", SyntheticPlot)
        assert plot.display
        drawn = shown(screen, "#batch-synthetic")
        assert drawn.startswith("synthetic acceptance (a measuring instrument, not a method): measured against "
                                "predicted, per α")
        assert "━ Theorem 3.8, cost-aware (predicted)" in drawn and "● α=0.5" in drawn and "▲ α=0.9" in drawn
        for size in (1, 2):
            cells = [c for c in screen.synthetic if c.batch == size]
            finite, theorem = within(cells)
            assert (f"batch {size}: within 10% of the finite prediction in {finite} of 4 cells, of Theorem 3.8 in "
                    f"{theorem} of 4") in drawn
        assert "┈" in drawn and drawn.count("└") == 2
        assert str(screen.query_one("#batch-status").content).startswith(
            "done: 2 rows measured, 8 synthetic cells (drawn below: pgdn)")
        await pilot.press("ctrl+s")
        await pilot.pause()
        saved = {p.name.split("-batch")[1]: p for p in (tmp_path / "runs").glob("*-batch*")}
        assert sorted(saved) == ["-synthetic.csv", ".csv", ".md"]
        assert len(saved[".csv"].read_text(encoding="utf-8").splitlines()) == 3  # a header and the two real rows
        synthetic_csv = saved["-synthetic.csv"].read_text(encoding="utf-8").splitlines()
        assert len(synthetic_csv) == 9 and synthetic_csv[1].startswith("synthetic α=0.5 γ=1,1,0.5,1,0.0,")
        markdown = saved[".md"].read_text(encoding="utf-8")
        assert "## Synthetic acceptance (a measuring instrument, not a method)" in markdown
        assert "```text\n━ Theorem 3.8, cost-aware (predicted)" in markdown
        await pilot.press("escape")
        assert app.screen is app.main_screen and not app.main_screen._decode_lock.locked()


async def test_escape_cancels_the_grid_at_the_next_iteration_and_keeps_its_cells(tiny_spec, loader, tmp_path,
                                                                                  monkeypatch):
    import time

    from decoders.backends.batched import BatchedLM

    real_step = BatchedLM.step

    def slow_step(self, new):
        time.sleep(0.02)
        return real_step(self, new)

    monkeypatch.setattr(BatchedLM, "step", slow_step)
    monkeypatch.setattr("decoders.bench.batch_surface.measure_surface",
                        lambda model, prompt, batches, **kw: ({b: [1.0] * 16 for b in batches}, 1.0))
    app = make_app(tiny_spec, loader, tmp_path, method="pld", max_new_tokens=16)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_batch(pilot, app)
        await type_into(pilot, screen, "#batch-sizes", "1")
        await type_into(pilot, screen, "#batch-grid", "0.5,0.7,0.9:1..8")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(screen.synthetic) >= 1, timeout=120)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not screen.running, timeout=60)
        await pilot.pause()
        assert screen.cancelled and screen.report is None and 1 <= len(screen.synthetic) < 24
        assert str(screen.query_one("#batch-status").content).startswith("cancelled: ")
        assert "batch 1: within 10% of the finite prediction in " in shown(screen, "#batch-synthetic")
        assert not app.main_screen.running and not app.main_screen._decode_lock.locked()
        await pilot.press("ctrl+s")  # the cells so far, with the rows
        await pilot.pause()
        markdown = next((tmp_path / "runs").glob("*-batch.md")).read_text(encoding="utf-8")
        assert "note: cancelled: the rows measured before escape" in markdown and "```text" in markdown


@pytest.mark.parametrize("text,line", [
    ("1.2", "synthetic acceptance must be in 0..1, got 1.2; give e.g. 0.5,0.7,0.9:1..8 (acceptance values : draft "
            "lengths [: draft cost c]) or leave it empty"),
    ("high", "synthetic grid takes acceptance values such as 0.5,0.7,0.9, got 'high'; give e.g. 0.5,0.7,0.9:1..8 "
             "(acceptance values : draft lengths [: draft cost c]) or leave it empty"),
    ("0.5:1..16", "synthetic grid's draft lengths must be 1..15 (T(B, γ+1) is measured up to k=16), got '1..16'; "
                  "give e.g. 0.5,0.7,0.9:1..8 (acceptance values : draft lengths [: draft cost c]) or leave it empty"),
    ("0.1,0.2,0.3,0.4,0.5:1..15", "synthetic grid asks for 5 x 15 = 75 cells, more than 64; give fewer acceptance "
                                  "values or draft lengths"),
    ("0.5:1..4:9", "synthetic grid: the draft cost after the second colon must be 0..4 one-token steps, got '9'; "
                   "give e.g. 0.5,0.7,0.9:1..8 (acceptance values : draft lengths [: draft cost c]) or leave it empty"),
    ("0.5:1..4:cheap", "synthetic grid: the draft cost after the second colon must be 0..4 one-token steps, got "
                       "'cheap'; give e.g. 0.5,0.7,0.9:1..8 (acceptance values : draft lengths [: draft cost c]) or "
                       "leave it empty"),
])
async def test_bad_grid_text_is_one_line_in_the_screen_and_nothing_is_lost(tiny_spec, loader, tmp_path, text, line):
    app = make_app(tiny_spec, loader, tmp_path, method="pld", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_batch(pilot, app)
        await type_into(pilot, screen, "#batch-sizes", "1,2")
        await type_into(pilot, screen, "#batch-grid", text)
        await pilot.press("enter")
        assert str(screen.query_one("#batch-error").content) == line
        assert not screen.running and screen.rows == [] and screen.synthetic == [] and not app.main_screen.running
        assert screen.query_one("#batch-grid", Input).value == text  # nothing lost
        assert screen.query_one("#batch-sizes", Input).value == "1,2"


def test_the_grid_takes_the_draft_cost_after_a_second_colon_and_empty_is_none():
    from tui_decode.state.batch_plan import parse_methods, parse_synthetic

    grid = parse_synthetic(" 0.9,0.5:2..3:0.05 ")
    assert grid is not None and (grid.alphas, grid.gammas, grid.cost) == ([0.5, 0.9], [2, 3], 0.05)
    assert parse_synthetic("0.7").gammas == list(range(1, 9)) and parse_synthetic("  ") is None
    offered = {"pld": None, "suffix": None, "spec": "no"}
    assert parse_methods("", offered, grid=True) == [] and parse_methods("ar", offered, grid=True) == []
    with pytest.raises(Exception, match="^methods: give one or more of"):
        parse_methods("", offered)


async def test_the_figure_shows_every_panel_with_fixed_rows():
    app = FigureApp()
    async with app.run_test(size=(110, 40)) as pilot:
        await pilot.pause()
        plot = app.query_one(SyntheticPlot)
        text = "\n".join(line.text for line in plot.render_lines(plot.region.reset_offset))
        assert plot.region.height == 2 + 2 * 14 + 1  # heading and legend, two panels, a blank line between
        assert "batch 1: within 10%" in text and "batch 4: within 10%" in text
