"""ctrl+c and SIGTERM on the command line: the first one unwinds the run (temporary files removed
on the way) to exit 130 or 143 with one line; one more while it unwinds is not a traceback."""

from __future__ import annotations

import os
import signal
import sys


class Terminated(BaseException):
    """SIGTERM arrived: unwind (temporary files are removed on the way) and exit 143."""


class Handlers:
    """Installs the handlers for the duration of `main`, and puts the previous ones back unless a
    signal came (the process is then on its way out, and a default handler put back could still
    turn one more ctrl+c into a traceback). After the first signal the handler does nothing (set
    to SIG_IGN instead, a signal already pending was "ignored due to race condition", an OSError)."""

    def __init__(self) -> None:
        self.previous: dict[int, object] = {}
        self.signalled = False

    def install(self) -> None:
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.signal(sig, self._on_signal)
        except ValueError:  # not the main thread: the caller's handlers stay
            self.previous = {}

    def _on_signal(self, signum, frame):  # pragma: no cover - exercised through a subprocess
        if self.signalled:  # a second ctrl+c while the first unwinds: it waits (no traceback)
            return
        self.signalled = True
        raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated()

    def restore(self) -> None:
        if self.signalled:
            return
        for sig, handler in self.previous.items():
            try:
                signal.signal(sig, handler)  # type: ignore[arg-type]
            except (ValueError, TypeError):
                pass

    @staticmethod
    def leave(code: int) -> None:
        """Exit with ``code`` at once (everything unwound, output flushed)."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
