"""The app needs a terminal: its keys come from standard input and Textual draws on standard error
(the output goes there too when redirected). Without one (`tui-decode < /dev/null`, cron, a CI
step) its input thread read end-of-file in a loop at 100% CPU, ctrl+q could not reach it, and a
redirected output filled with escape sequences until it was killed (issue 40). `check_terminal`
refuses that start in one line, before Textual loads, pointing at `tui-decode run`."""

from __future__ import annotations

import sys
from typing import TextIO

from decoders.core.errors import DecodeError

#: Whether `check_terminal` refuses a start without a terminal. The test suite, which calls the
#: command line in-process (pytest's captured streams are no terminals), turns it off
#: (tests/conftest.py); a child process of a test keeps it.
NEEDS_TERMINAL = True

_STREAMS = (("input", "stdin"), ("output", "stdout"), ("error output", "stderr"))


def is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):  # closed
        return False


def not_a_terminal() -> str | None:
    """The first of standard input, output and error output that is not a terminal ("input"), or None."""
    for name, attribute in _STREAMS:
        if not is_terminal(getattr(sys, attribute)):
            return name
    return None


def check_terminal() -> None:
    """DecodeError (exit 2) when the app cannot run here: a stream is not a terminal."""
    if not NEEDS_TERMINAL:
        return
    name = not_a_terminal()
    if name is not None:
        raise DecodeError(f"the app needs a terminal, and its standard {name} is not one (redirected or closed); "
                          "run it in a terminal, or decode without one with `tui-decode run --prompt TEXT`")
