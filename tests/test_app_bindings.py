"""Each key is bound on the screen whose action handles it: the app binds only its own app-wide
keys, and forwards nothing to the main screen."""

from __future__ import annotations

from textual import actions

from tui_decode.app import TuiDecodeApp
from tui_decode.screens import CompareScreen
from tui_decode.screens.main import MainScreen

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
