"""What the app tests share: the tiny prompt and terminal size, an engine that paces its
iterations, the app on a tiny model, and waiting for a condition in a Pilot session."""

from __future__ import annotations

import time
from pathlib import Path

from decoders.engine import Engine
from decoders.records.run import Iteration, RunResult
from tui_decode.app import TuiDecodeApp
from tui_decode.state.settings import START_PARAMS, Settings

DATA = Path(__file__).resolve().parents[1] / "data"
SIZE = (140, 45)
# Repetitive words give prompt lookup something to copy.
PROMPT = "w10 w11 w12 w13 w14 w10 w11 w12 w20 w21 w22 w10 w11 w12 w13"


class PacedEngine(Engine):
    """A real engine that pauses after each iteration, so a person (a test) can act mid-run."""

    pause = 0.03

    def stream(self, prompt, params, cancelled=lambda: False, idle=None):
        for event in super().stream(prompt, params, cancelled, idle):
            if isinstance(event, Iteration):
                time.sleep(self.pause)
            yield event


def make_app(tiny_spec, loader, tmp_path, engine_factory=Engine, method="spec", max_new_tokens=24, **kw):
    settings = Settings(START_PARAMS.replace(method=method, max_new_tokens=max_new_tokens))
    return TuiDecodeApp(tiny_spec, load_family=loader, engine_factory=engine_factory, runs_folder=tmp_path / "runs",
                        prompt=PROMPT, settings=settings, cursor_blink=False, **kw)


async def wait_for(pilot, condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.02)


async def run_and_wait(pilot, app) -> RunResult:
    """Press ctrl+r and wait for the run's result to be shown."""
    previous = app.main_screen.result
    await pilot.press("ctrl+r")
    await wait_for(pilot, lambda: app.main_screen.result is not previous and not app.main_screen.running)
    await pilot.pause()
    return app.main_screen.result


def errors(app) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]
