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
