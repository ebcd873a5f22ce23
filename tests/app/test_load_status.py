"""A load step that says nothing for a while (the imports, a GGUF's metadata, quantizing the int4
draft: 25 s under load) is not a frozen bar: the status line counts its seconds."""

from __future__ import annotations

import re
import threading

import pytest

from tests.support.app import make_app, wait_for
from tui_decode.screens.main import family

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_a_quiet_load_step_counts_its_seconds_in_the_status_line(tiny_spec, tiny_family, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(family, "QUIET_STEP", 0.3)
    release = threading.Event()

    def load(spec, progress):
        progress("Quantizing the main model to int4 for the draft", 0.9)
        release.wait(30)
        return tiny_family

    app = make_app(tiny_spec, load, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        main = app.main_screen
        counted = re.compile(r"Quantizing the main model to int4 for the draft … \d+ s")
        try:
            await wait_for(pilot, lambda: counted.fullmatch(main.status.message) is not None, timeout=10)
            assert main.status.fraction == 0.9 and main.status.state == "busy"
        finally:
            release.set()
        await wait_for(pilot, lambda: main.loaded is not None)
        assert "…" not in main.status.message  # the ready line, no more counting


DRAFT_CHOICE = {
    "chosen": "head",
    "candidates": [{"kind": "head", "source": "ptd head /home/someone/.cache/tui-decode/heads/smollm2",
                    "predicted": 1.13, "gamma": 1, "c": 0.15, "accept": [0.45]},
                   {"kind": "int4", "source": "int4 self-draft", "predicted": 1.04, "gamma": 5, "c": 0.5,
                    "accept": [0.7]}],
    "sentence": "ptd head /home/someone/.cache/tui-decode/heads/smollm2: predicted 1.13x at γ 1 here (c 0.15, "
                "acceptance 45%, T(2) 1.05); int4 self-draft 1.04x (c 0.50, acceptance 70%)",
}
DTYPE_CHOICE = {"chosen": "float32", "sentence": "float32, the faster here (float32: 70.1 ms steps; float16 "
                                                 "weights: 80.2 ms steps)"}


def chose_at_load(tiny_family):
    """A loader whose family, as the bundled one's default does, measured its dtype and draft."""
    import dataclasses

    chosen = dataclasses.replace(tiny_family, draft_choice=DRAFT_CHOICE, dtype_choice=DTYPE_CHOICE)
    return lambda spec, progress: chosen


async def test_at_80x24_the_load_time_choice_is_in_the_status_line_and_no_toast_covers_the_page(
        tiny_spec, tiny_family, tmp_path):
    """At 80x24 the two load-time toasts (dtype, draft: twelve seconds each) covered the Output
    page, its legend and the status line after "ready". One page at a time, the status line says
    the choice in a few words instead; no toast covers anything."""
    from tests.app.test_app_layout import screen_lines

    app = make_app(tiny_spec, chose_at_load(tiny_family), tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        await pilot.pause()
        assert "measured here: float32 weights, trained head drafts (predicted 1.13x at γ 1)" in main.status.message
        assert not app._notifications, [n.message for n in app._notifications]
        main.show_page("output")
        await pilot.pause(0.2)
        lines = screen_lines(app)
        assert any("■ accepted draft ■ fixed ■ bonus ■ autoregressive" in line for line in lines), lines
        assert "ready: " in lines[-3] + lines[-2], lines[-4:]


async def test_from_120_columns_the_load_time_choice_is_one_toast_with_the_figures(tiny_spec, tiny_family, tmp_path):
    app = make_app(tiny_spec, chose_at_load(tiny_family), tmp_path)
    async with app.run_test(size=(140, 45), notifications=True) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        await pilot.pause()
        toasts = list(app._notifications)
        assert len(toasts) == 1 and toasts[0].title == "Chosen on this machine", toasts
        assert "Target dtype: float32, the faster here" in toasts[0].message
        assert "acceptance 45%" in toasts[0].message
        assert "Draft: ptd head smollm2: predicted 1.13x" in toasts[0].message  # the head's name, not its path
        assert "measured here" not in main.status.message
