"""Where the time went: both runs on one wall-clock axis (prefill, draft, verify, other), so the
longer bar is the slower run; shown above the compare screen's streams."""

from __future__ import annotations

import pytest

from decoders.records.run import Emitted, Iteration, Run
from tests.support.app import make_app, run_and_wait, wait_for
from tui_decode.screens.compare_screen import CompareScreen
from tui_decode.state.timeline import columns, shares, spans

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def run_of(iters: list[tuple[float, float, float]]) -> Run:
    """Iterations of (draft ms, verify ms, end ms)."""
    its = [Iteration(k=k, pos=k, draft=[], emit=[Emitted(1, "x", "ar")], t_draft_ms=d, t_verify_ms=v, t_end_ms=end)
           for k, (d, v, end) in enumerate(iters)]
    return Run(label="r", method="spec", ids=[1] * len(its), kinds=["ar"] * len(its), tok_iter=[], iters=its,
               finish="length", time_ms={"wall": iters[-1][2]})


def test_spans_split_each_iteration_into_its_phases():
    run = run_of([(0.0, 100.0, 110.0), (20.0, 50.0, 80 + 110.0)])
    assert [(s.phase, s.start_ms, s.end_ms) for s in spans(run)] == [
        ("prefill", 0.0, 100.0), ("other", 100.0, 110.0), ("draft", 110.0, 130.0), ("verify", 130.0, 180.0),
        ("other", 180.0, 190.0)]
    assert shares(run) == {"prefill": 100.0, "draft": 20.0, "verify": 50.0, "other": 20.0}


def test_two_runs_share_one_axis_so_the_slower_is_longer():
    fast = run_of([(0.0, 100.0, 100.0), (0.0, 100.0, 200.0)])
    slow = run_of([(0.0, 100.0, 100.0), (100.0, 200.0, 400.0)])
    a, b = columns(fast, 8, 400.0), columns(slow, 8, 400.0)
    assert a == ["prefill", "prefill", "verify", "verify", "idle", "idle", "idle", "idle"]
    assert b == ["prefill", "prefill", "draft", "draft", "verify", "verify", "verify", "verify"]


async def test_the_compare_screen_draws_both_runs_timelines(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=12)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await run_and_wait(pilot, app)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.pause()
        text = str(app.screen.query_one("#compare-timeline").render())
        lines = text.splitlines()
        assert lines[0].startswith("#1 AR") and lines[1].startswith("#1 spec")
        assert "▓" in lines[0] and "█" in lines[1] and "░" in lines[1]  # prefill; verify and draft of the method
        assert "prefill" in lines[2] and "ms" in lines[2]


def test_a_saved_run_without_end_times_is_drawn_from_its_parts():
    run = run_of([(0.0, 100.0, 100.0), (0.0, 100.0, 200.0)])
    for it in run.iters:
        it.t_end_ms = None
    from tui_decode.state.timeline import total_ms

    assert total_ms(run) == 200.0 and columns(run, 4, 200.0) == ["prefill", "prefill", "verify", "verify"]
    assert columns(run, 4, 0.0) == ["idle"] * 4


async def test_the_compare_screen_tables_both_runs_figures_and_exports_them(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=12)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        result = await run_and_wait(pilot, app)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.pause()
        widget = app.screen.query_one("#compare-figures")
        table = "\n".join(line.text for line in widget.render_lines(widget.region.reset_offset))
        assert "decode speedup" in table and "1.00x (the baseline)" in table
        assert f"{result.summary.speedup_decode:.2f}x" in table and "of judged drafts (" in table
        await pilot.press("x")
        await pilot.pause()
        exported = list((tmp_path / "runs").glob("*-compare.md"))
        assert len(exported) == 1
        text = exported[0].read_text()
        assert text.startswith("# Compare: #1 baseline") and "| decode speedup | 1.00x (the baseline) |" in text
