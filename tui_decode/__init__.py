"""tui-decode: watch parallel LLM decoding happen, token by token, and measure what it buys.

The app's layers: ``state`` (Textual-free: settings, the live run, history, the loaded family)
-> ``widgets`` (one UI area each, no torch) -> ``workers`` (thread workers and their messages)
-> ``screens`` (every screen, the main one included) -> ``app``; ``cli`` parses the command line
and opens the app or runs headless. It holds an engine (`decoders`), never the reverse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from decoders import __version__

#: Public names and the module each lives in, imported when first asked for (Textual loads late).
_PUBLIC = {"main": "tui_decode.cli.main", "run_app": "tui_decode.app", "TuiDecodeApp": "tui_decode.app"}

if TYPE_CHECKING:
    from tui_decode.app import TuiDecodeApp, run_app
    from tui_decode.cli.main import main

__all__ = ["__version__", "main", "run_app", "TuiDecodeApp"]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'tui_decode' has no attribute {name!r}")
