"""The main screen (the workbench) and what it is made of: its layout, its run files (ctrl+s, ctrl+o)."""

from tui_decode.screens.main.screen import MainScreen

__all__ = ["MainScreen"]
