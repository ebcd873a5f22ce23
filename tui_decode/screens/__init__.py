"""Screens over the main one: the help, the session's run history, two runs side by side, the pickers."""

from tui_decode.screens.compare_screen import CompareScreen
from tui_decode.screens.help_screen import HelpScreen
from tui_decode.screens.history_screen import HistoryScreen

__all__ = ["CompareScreen", "HelpScreen", "HistoryScreen"]
