"""The app's wiring: each key is bound on the screen whose action handles it (the app binds only
its own app-wide keys, and forwards nothing to the main screen); and the main screen provides what
each of its mixins declares it needs (their host Protocols)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import actions

from decoders.records.run import RunResult
from tui_decode.app import TuiDecodeApp
from tui_decode.screens import CompareScreen
from tui_decode.screens.main import MainScreen
from tui_decode.screens.main.family import FamilyHost
from tui_decode.screens.main.layout import LayoutHost
from tui_decode.screens.main.saving import RunFilesHost
from tui_decode.screens.main.showing import RunViewHost
from tui_decode.workers.decode import DecodeHost, FamilyLoadHost
from tui_decode.workers.draft import DraftHost

DATA = Path(__file__).parents[1] / "data"

APP_WIDE = {"quit", "help", "help_key"}


def _handler(owner: type, action: str) -> str:
    namespace, name, _ = actions.parse(action)
    target = TuiDecodeApp if namespace == "app" else owner
    assert namespace in ("", "screen", "app"), action
    assert callable(getattr(target, f"action_{name}", None)), f"{owner.__name__}: {action!r} has no handler"
    return name


def test_the_app_binds_only_app_wide_keys():
    bound = {_handler(TuiDecodeApp, binding.action) for binding in TuiDecodeApp.BINDINGS}
    assert bound <= APP_WIDE, bound - APP_WIDE
    own = {name.removeprefix("action_") for name in vars(TuiDecodeApp) if name.startswith("action_")}
    assert own <= APP_WIDE, f"actions that only forward to a screen: {sorted(own - APP_WIDE)}"


def test_every_screen_binding_has_its_handler_on_that_screen():
    for screen in (MainScreen, CompareScreen):
        for binding in screen.BINDINGS:
            _handler(screen, binding.action)
    main_actions = {actions.parse(binding.action)[1] for binding in MainScreen.BINDINGS}
    assert {"run", "cancel", "save", "open_run", "pick_family", "sweep", "history", "compare_baseline"} <= main_actions


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_main_screen_provides_what_each_of_its_mixins_declares(tmp_path):
    app = TuiDecodeApp(None, opened=RunResult.load(DATA / "run_spec.json"), opened_name="run_spec.json",
                       runs_folder=tmp_path / "runs", cursor_blink=False)
    async with app.run_test(size=(120, 36)):
        main = app.main_screen
        for host in (LayoutHost, RunViewHost, RunFilesHost, FamilyHost, FamilyLoadHost, DecodeHost, DraftHost):
            assert isinstance(main, host), host.__name__
