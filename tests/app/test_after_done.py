"""Once a run's last token is in, the run is done: while the engine measures the verify-cost curve
T(k) afterwards (2-5 s on this 2-core machine, far longer when it is loaded), the footer stops
offering escape, the status line says what is measured, the keys answer, and a ctrl+r meanwhile
runs once the result is in."""

from __future__ import annotations

import threading
import time

import pytest
from textual.widgets._footer import FooterKey

from decoders.core.events import Progress
from decoders.engine import Engine
from decoders.records.run import Iteration
from tests.support.app import make_app, wait_for
from tui_decode.screens import HelpScreen

pytestmark = pytest.mark.anyio
SIZE = (140, 45)


@pytest.fixture
def anyio_backend():
    return "asyncio"


class HeldCurveEngine(Engine):
    """A real engine whose T(k) measurement stops after its first forward until the test lets it
    go (`release`), so the test acts while the curve is measured; and whose run waits after its
    first iteration until `go` is set (the test looks at the footer meanwhile)."""

    def __init__(self, family, clock=None):
        super().__init__(family, clock)
        self.go = threading.Event()
        self.release = threading.Event()
        self.held = threading.Event()  # the curve is being measured and waits

    def stream(self, prompt, params, cancelled=lambda: False, idle=None):
        for event in super().stream(prompt, params, cancelled, idle):
            yield event
            if isinstance(event, Iteration):
                self.go.wait(30)

    def warm(self, prompt, params, tokens=0):
        """No warm-up: it would measure T(k) before the run, and this test needs it measured after."""

    def cost_curve(self, seq, cancelled=lambda: False):
        steps = super().cost_curve(seq, cancelled)
        try:
            while True:
                event = next(steps)
                yield event
                if isinstance(event, Progress) and not self.release.is_set():
                    self.held.set()
                    self.release.wait(30)
        except StopIteration as finished:
            return finished.value


def footer_actions(app) -> list[str]:
    return [key.action for key in app.main_screen.footer.query(FooterKey)]


async def test_after_the_last_token_the_footer_drops_cancel_and_f1_opens_while_t_k_is_measured(
        tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=HeldCurveEngine, method="spec", max_new_tokens=24)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        engine = main.loaded.engine
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: main.table.row_count + main.stream.token_count > 0)
        await wait_for(pilot, lambda: "cancel" in footer_actions(app))  # while tokens come, escape cancels
        engine.go.set()
        await wait_for(pilot, lambda: engine.held.is_set() and main.measuring)
        await pilot.pause()
        assert main.running and main.result is None  # the result (with T(k)) is not in yet ...
        assert "cancel" not in footer_actions(app)  # ... but there is nothing left to cancel
        assert not main.check_action("cancel", ())
        assert "measuring T(k)" in main.status.message and "done, 24 tokens" in main.status.message
        assert main.stream.token_count == 24 and main.table.row_count == len(main.live.iterations)

        turns = 0
        started = time.monotonic()
        await pilot.press("f1")
        while not isinstance(app.screen, HelpScreen) and turns < 50:
            await pilot.pause()
            turns += 1
        elapsed = time.monotonic() - started
        print(f"F1 while T(k) was measured: the help opened after {turns} more turns, {1000 * elapsed:.0f} ms")
        assert isinstance(app.screen, HelpScreen) and turns <= 2
        assert elapsed < 5.0  # generous: the help itself is built in this time (on a loaded machine)
        assert not engine.release.is_set()  # all of it while the curve still waited
        await pilot.press("escape")
        assert app.screen is main and main.measuring  # escape closed the help, cancelled nothing

        engine.release.set()
        await wait_for(pilot, lambda: not main.running)
        await pilot.pause()
        assert not main.measuring and main.status.state == "done" and main.status.message.startswith("done in")
        assert main.result.summary.verify_cost_curve is not None  # the curve was measured whole
        assert main.result.method.finish != "cancelled"


async def test_ctrl_r_while_t_k_is_measured_runs_once_the_result_is_in(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=HeldCurveEngine, method="pld", max_new_tokens=16)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        engine = main.loaded.engine
        engine.go.set()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: engine.held.is_set() and main.measuring)
        await pilot.press("ctrl+r")
        assert any("next starts as soon as T(k) is measured" in n.message for n in app._notifications)
        engine.release.set()
        await wait_for(pilot, lambda: len(main.history.entries) >= 1)
        await wait_for(pilot, lambda: len(main.history.entries) == 2 and not main.running)
        assert [entry.result.params["method"] for entry in main.history.entries] == ["pld", "pld"]
