"""No UI work on a timed clock (issue 36): a UI that burns CPU on every batch it draws must not
run while the engine works. Before the decode worker waited for each batch to be drawn
(`tui_decode.workers.draw_gate`), the UI drew while the engine went on with the baseline's steps
(they run right after each method iteration is handed out), and autoregressive decoding read
1.24-1.62x faster than itself in a live app."""

from __future__ import annotations

import dataclasses
import time

import pytest

from decoders.backends.hf import twin_of
from decoders.engine import Engine
from tests.support.app import make_app, run_and_wait, wait_for
from tui_decode.screens.main.screen import MainScreen

pytestmark = pytest.mark.anyio

BURN = 0.03  # seconds of pure Python (the interpreter lock held) per batch the UI draws


def burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


@pytest.fixture
def burning_ui(monkeypatch):
    """The main screen's batch handler, followed by `BURN` seconds of work on the UI thread;
    the spans (start, end) of each, by `time.perf_counter`."""
    spans: list[tuple[float, float]] = []
    handle = MainScreen.on_run_batch

    def on_run_batch(self, event) -> None:
        start = time.perf_counter()
        handle(self, event)
        burn(BURN)
        spans.append((start, time.perf_counter()))

    monkeypatch.setattr(MainScreen, "on_run_batch", on_run_batch)
    return spans


class Slow:
    """A backend whose forwards give up the interpreter lock `OPS` times, as a real model's torch
    ops do: the UI thread may run meanwhile, and each op waits to take the lock back while it does."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def cached_length(self) -> int:
        return self.inner.cached_length

    def forward(self, ids, keep, positions=None, mask=None):
        for _ in range(OPS):
            time.sleep(OP)
        return self.inner.forward(ids, keep, positions, mask)

    def twin(self):
        return Slow(twin_of(self.inner))


OPS = 20  # lock hand-overs per forward
OP = 0.0001  # seconds asleep (off the lock) in each


class WatchedEngine(Engine):
    """A real engine on slow forwards that notes when it works (every timed step lies inside one
    of its spans)."""

    spans: list[tuple[float, float]] = []

    def __init__(self, family):
        super().__init__(dataclasses.replace(family, main=Slow(family.main)))

    def stream(self, prompt, params, cancelled=lambda: False, idle=None):
        """Spans of work: from the consumer asking for the next event to the event handed over,
        less the engine's quiet points (``idle``: where the worker waits for the UI to draw)."""
        start: list[float] = []

        def close() -> None:
            if start:
                WatchedEngine.spans.append((start.pop(), time.perf_counter()))

        def quiet(next_run: str) -> None:
            close()
            if idle is not None:
                idle(next_run)
            start.append(time.perf_counter())

        events = super().stream(prompt, params, cancelled, idle=quiet)
        while True:
            start.append(time.perf_counter())
            try:
                event = next(events)
            except StopIteration:
                close()
                return
            close()
            yield event


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


async def test_the_ui_never_draws_while_the_engine_works(tiny_spec, loader, tmp_path, burning_ui):
    WatchedEngine.spans = []
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=WatchedEngine, method="ar", max_new_tokens=96)
    async with app.run_test(size=(140, 45), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        result = await run_and_wait(pilot, app)
    assert result.method.finish == "length" and len(result.method.ids) == 96
    assert len(burning_ui) >= 2, "the UI drew too few batches for the check to mean anything"
    # the old worker: the burn ran beside the baseline's steps (tens of ms of overlap)
    assert overlap(burning_ui, WatchedEngine.spans) == 0.0




class ForwardsWatched(Engine):
    """A real engine on slow forwards that notes each forward made while it streams a run (the
    warm-up before a run is not timed and not noted)."""

    spans: list[tuple[float, float]] = []

    def __init__(self, family):
        super().__init__(dataclasses.replace(family, main=Noted(family.main)))

    def stream(self, prompt, params, cancelled=lambda: False, idle=None):
        Noted.on = True
        try:
            yield from super().stream(prompt, params, cancelled, idle)
        finally:
            Noted.on = False


class Noted(Slow):
    on = False

    def forward(self, ids, keep, positions=None, mask=None):
        start = time.perf_counter()
        try:
            return super().forward(ids, keep, positions, mask)
        finally:
            if Noted.on:
                ForwardsWatched.spans.append((start, time.perf_counter()))

    def twin(self):
        return Noted(twin_of(self.inner))


@pytest.mark.parametrize("hold", ["1", "0"])
async def test_the_ui_s_own_timers_never_run_beside_a_timed_forward(tiny_spec, loader, tmp_path, monkeypatch, hold):
    """Drawing each batch before the next step was not enough on two cores: the UI's timers (and
    what a draw leaves behind) ran on the other core between the decode thread's torch ops, and
    autoregressive decoding read 0.90x of itself at 120x40 (5/10 runs inside their spread). The
    worker holds the UI's loop between hand-overs: a timer that burns the interpreter lock every
    few milliseconds then never runs beside a forward of the run. TUI_DECODE_HOLD=0 (the old
    worker) must show the overlap, or the check proves nothing."""
    monkeypatch.setenv("TUI_DECODE_HOLD", hold)
    ForwardsWatched.spans = []
    ticks: list[tuple[float, float]] = []

    def tick() -> None:
        start = time.perf_counter()
        burn(0.002)
        ticks.append((start, time.perf_counter()))

    app = make_app(tiny_spec, loader, tmp_path, engine_factory=ForwardsWatched, method="ar", max_new_tokens=64)
    async with app.run_test(size=(140, 45), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        app.main_screen.set_interval(0.003, tick)
        result = await run_and_wait(pilot, app)
    assert len(result.method.ids) == 64 and len(ForwardsWatched.spans) >= 128
    during = [t for t in ticks if ForwardsWatched.spans[0][0] <= t[0] <= ForwardsWatched.spans[-1][1]]
    assert len(during) >= 5, "the timer hardly ran during the run: the check would prove nothing"
    shared = overlap(ticks, ForwardsWatched.spans)
    if hold == "1":
        assert shared == 0.0
    else:
        assert shared > 0.0
