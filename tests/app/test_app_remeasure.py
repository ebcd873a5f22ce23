"""The palette's "Measure dtype and draft again": the family loads again with its 'fastest' dtype
and draft measured afresh (`FamilySpec.remeasure`), once; a family that fixes both says there is
nothing to measure."""

from __future__ import annotations

from dataclasses import replace

import pytest

from decoders.models.drafts import Fastest
from tests.support.app import make_app, wait_for
from tui_decode.screens.main.family import REMEASURE_COMMAND

pytestmark = pytest.mark.anyio


def _command(app):
    return next(c for c in app.get_system_commands(app.screen) if c.title == REMEASURE_COMMAND)


async def test_the_palette_loads_the_family_again_measuring_its_choice_afresh(tiny_spec, tiny_family, tmp_path):
    asked: list[bool] = []

    def load(spec, progress):
        asked.append(spec.remeasure)
        return tiny_family

    app = make_app(replace(tiny_spec, draft=Fastest(), dtype="fastest"), load, tmp_path)
    async with app.run_test(notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        _command(app).callback()
        await wait_for(pilot, lambda: len(asked) == 2 and not app.main_screen.loading_family)
        assert asked == [False, True]
        assert app.main_screen.spec.remeasure is False  # a later load (a retry, a switch back) reuses it


async def test_a_family_that_fixes_its_dtype_and_draft_has_nothing_to_measure(tiny_spec, tiny_family, tmp_path):
    asked: list[bool] = []

    def load(spec, progress):
        asked.append(spec.remeasure)
        return tiny_family

    app = make_app(tiny_spec, load, tmp_path)
    async with app.run_test(notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        _command(app).callback()
        await pilot.pause()
        assert asked == [False]
        assert any("nothing to measure again" in n.message for n in app._notifications)
