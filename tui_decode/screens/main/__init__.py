"""The main screen (the workbench) and its parts: keys, settings and runs (screen), layout, showing
a run (showing), saving and opening runs (saving), switching the family (family)."""

from tui_decode.screens.main.screen import MainScreen

__all__ = ["MainScreen"]
