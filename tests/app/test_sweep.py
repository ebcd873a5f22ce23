"""The gamma sweep (s) on a tiny random model: one measured point per value, the baseline measured
once, the predicted curve drawn, cancel keeps the points so far, and its value range."""

from __future__ import annotations

import pytest

from decoders.methods.jacobi import BLOCK
from decoders.methods.speculative import GAMMA
from tests.support.app import PacedEngine, make_app, run_and_wait, wait_for
from tui_decode.screens.sweep import SweepScreen, sweep_values

pytestmark = pytest.mark.anyio
SIZE = (140, 45)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_values_are_bounded_and_start_with_the_current_one():
    assert sweep_values(GAMMA, 4) == [4, 1, 2, 3, 5, 6, 7, 8]
    assert sweep_values(GAMMA, 16) == [16, 9, 10, 11, 12, 13, 14, 15]  # the app's range ends at 16
    assert sweep_values(BLOCK, 1) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert len(sweep_values(BLOCK, 40)) == 8


async def test_sweep_measures_one_point_per_value_each_beside_its_own_baseline(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await pilot.press("s")
        sweep = app.screen
        assert isinstance(sweep, SweepScreen)
        await wait_for(pilot, lambda: not sweep.running, timeout=120)
        assert sweep.error is None
        assert [m.value for m in sweep.points] == [4, 1, 2, 3, 5, 6, 7, 8]
        # every point decoded its own baseline alongside it (interleaved), none cached
        assert app.main_screen.loaded.engine.baselines_measured == 0
        plot = sweep.query_one("#sweep-plot").data
        assert sorted(p.value for p in plot.points) == list(range(1, 9))
        assert len(plot.curve) == 10 and plot.cost_aware  # Theorem 3.8 and the cost-aware curve
        assert all(p.spread is not None for p in plot.points)
        assert "done: 8/8 measured" in str(sweep.query_one("#sweep-status").content)
        await pilot.press("escape")  # closes once done
        assert app.screen is app.main_screen


async def test_escape_cancels_a_sweep_and_keeps_its_points(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=PacedEngine, max_new_tokens=16)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await pilot.press("s")
        sweep = app.screen
        await wait_for(pilot, lambda: len(sweep.points) >= 1, timeout=60)
        await pilot.press("ctrl+r")  # no run while the sweep holds the engine
        assert any("already going" in n.message for n in app._notifications)
        assert app.main_screen.live is None
        await pilot.press("escape")
        await wait_for(pilot, lambda: not sweep.running, timeout=30)
        assert sweep.cancelled and 1 <= len(sweep.points) < 8
        assert str(sweep.query_one("#sweep-status").content).startswith("cancelled: ")
        await pilot.press("escape")
        assert app.screen is app.main_screen
        assert not app.main_screen._decode_lock.locked()  # the engine is free for the next run
        assert not app.main_screen.running


async def test_an_engine_error_stops_the_sweep_in_one_line(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=120)  # prompt + 120 > the tiny model's 128
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await pilot.press("s")
        sweep = app.screen
        await wait_for(pilot, lambda: not sweep.running, timeout=30)
        assert sweep.points == [] and "exceeds the model's context of 128" in sweep.error
        assert str(sweep.query_one("#sweep-status").content).startswith("stopped: the prompt (")
        assert not app.main_screen.running


async def test_autoregressive_has_nothing_to_sweep(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="ar")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await pilot.press("s")
        assert app.screen is app.main_screen
        assert any("drafts nothing to sweep" in n.message for n in app._notifications)


async def test_the_sweep_holds_gamma_fixed_keeps_its_columns_at_80x24_and_saves(tiny_spec, loader, tmp_path):
    """The γ sweep measures γ itself (the draft policy fixed, said in its title), not a cap the
    adaptive policy narrows; at 80x24 its table shows γ and the speedup uncut; ctrl+s writes it."""
    app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=8)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        assert app.main_screen.settings.params.draft_policy == "adaptive"
        await pilot.press("s")
        sweep = app.screen
        await wait_for(pilot, lambda: not sweep.running, timeout=120)
        await pilot.pause()  # the table's new height (its last row) is laid out a refresh after the point
        assert "draft policy fixed" in sweep.query_one("#sweep-box").border_title
        assert all(m.summary.label.startswith("Speculative") and "γ=" in m.summary.label for m in sweep.points)
        shown = "\n".join(line.text for line in sweep.query_one("#sweep-table").render_lines(
            sweep.query_one("#sweep-table").region.reset_offset))
        header = shown.splitlines()[0]
        assert header.split()[0] == "γ" and "speedup ± spread" in header
        for value in range(1, 9):
            assert any(line.split()[:1] == [str(value)] and "x" in line for line in shown.splitlines()[1:])
        await pilot.press("ctrl+s")
        await pilot.pause()
        saved = sorted((tmp_path / "runs").glob("*-sweep-spec-gamma.*"))
        assert [p.suffix for p in saved] == [".csv", ".md"]
        csv_lines = saved[0].read_text(encoding="utf-8").splitlines()
        assert csv_lines[0].startswith("γ,speedup,spread,verdict") and len(csv_lines) == 9  # as the table names it
        markdown = saved[1].read_text(encoding="utf-8")
        assert "| γ | speedup |" in markdown and "adaptive" not in markdown  # the policy fixed, as its title says


async def test_r_repeats_the_current_settings_and_pools_the_speedups(tiny_spec, loader, tmp_path):
    from tui_decode.screens.sweep import REPEATS, RepeatScreen

    app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=8)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        await pilot.press("r")
        screen = app.screen
        assert isinstance(screen, RepeatScreen)
        await wait_for(pilot, lambda: not screen.running, timeout=120)
        assert [m.value for m in screen.points] == list(range(1, REPEATS + 1))
        labels = {m.summary.label for m in screen.points}
        assert len(labels) == 1 and all(m.summary.pairing == "interleaved" for m in screen.points)
        status = str(screen.query_one("#sweep-status").content)
        assert f"done: {REPEATS}/{REPEATS} measured; pooled: " in status and " autoregressive (" in status
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert sorted(p.suffix for p in (tmp_path / "runs").glob("*-repeat-spec.*")) == [".csv", ".md"]


async def test_n_calibrates_keeps_the_noise_and_the_next_run_is_widened_by_it(tiny_spec, loader, tmp_path,
                                                                             calibration_file):
    from tui_decode.screens.sweep import CALIBRATION_RUNS, CalibrateScreen

    app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=8)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        assert "n calibrates" in app.main_screen.status.message
        await pilot.press("n")
        screen = app.screen
        assert isinstance(screen, CalibrateScreen)
        await wait_for(pilot, lambda: not screen.running, timeout=120)
        assert len(screen.points) == CALIBRATION_RUNS
        assert all(m.summary.method == "ar" and m.summary.calibration is None for m in screen.points)
        assert "every spread now covers a second run" in str(screen.query_one("#sweep-status").content)
        engine = app.main_screen.loaded.engine
        assert engine.calibration is not None and calibration_file.exists()
        await pilot.press("escape")
        result = await run_and_wait(pilot, app)
    s = result.summary
    assert s.calibration == engine.calibration.as_dict() and s.speedup_spread_steps is not None


async def test_a_cancelled_calibration_keeps_the_one_before(tiny_spec, loader, tmp_path, calibration_file):
    from decoders.analysis.calibration import Calibration
    from decoders.models.machine import save_calibration
    from tui_decode.screens.sweep import CalibrateScreen

    app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=8)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        engine = app.main_screen.loaded.engine
        before = Calibration(key=engine.machine()[0], machine={}, measured="2026-12-01T00:00:00+00:00",
                             runs=[1.0, 1.1], step_spreads=[0.1, 0.1], tokens=8, prompt_tokens=9, noise=0.04)
        save_calibration(before)
        engine.use_calibration(before)
        kept = calibration_file.read_bytes()
        lock = app.main_screen._decode_lock
        lock.acquire()  # the calibration's worker waits here until escape has been handled: no race
        try:
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, CalibrateScreen))
            screen = app.screen
            await pilot.press("escape")
            await wait_for(pilot, lambda: screen.cancelled)
        finally:
            lock.release()
        await wait_for(pilot, lambda: not screen.running, timeout=120)
        assert screen.points == [] and "cancelled" in str(screen.query_one("#sweep-status").content)
        assert engine.calibration == before and calibration_file.read_bytes() == kept
