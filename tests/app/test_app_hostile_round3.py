"""Issue 26's second sweep against the real app (Pilot): odd files, odd keys at odd times; the
session survives, keeps what it had, and says in one notification what was wrong."""

from __future__ import annotations

import json

import pytest

from decoders.records.run import RunResult
from tests.support.app import DATA, errors, make_app, wait_for

pytestmark = pytest.mark.anyio
SIZE = (140, 45)


def screen_text(app) -> str:
    """What the screen shows, as text (the SVG screenshot without its markup)."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot())).replace("\xa0", " ")


def saved_run(tmp_path, change, name="odd.json"):
    data = json.loads((DATA / "run_spec.json").read_text())
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


async def test_compare_on_a_run_with_a_vanishing_acceptance_rate(tiny_spec, loader, tmp_path):
    """Issue 26: the compare table rebuilt the judged drafts as accepted / accept_rate: 5e-324 (a
    valid probability) made it infinite, an OverflowError that ended the app. The counts come from
    the iterations."""
    from tui_decode.screens.compare_screen import CompareScreen

    path = saved_run(tmp_path, lambda d: d["summary"].__setitem__("accept_rate", 5e-324))
    app = make_app(tiny_spec, loader, tmp_path, opened=RunResult.load(path), opened_name=path.name)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.set_up.is_set())
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.pause()
        text = screen_text(app)
        assert app.is_running and not errors(app)
        assert "acceptance" in text and "inf" not in text.replace("info", "")
