"""SIGTERM and SIGHUP in the app: leave within a second, whatever its queue holds, and leave no
half-written file behind.

The app used to leave on SIGTERM through its own exit message, which waits in the app's queue
behind every key already read: behind a 1 MB paste delivered key by key, a SIGTERM was not acted
on 65 s later; and it had no SIGHUP handler at all, so closing the terminal killed it wherever it
was, in the middle of a save too, leaving a ``.tmp-*`` file (issue 40).

Here the handler is the interpreter's own (`signal.signal`): it runs in the main thread at the
next bytecode, however long the queue. If a thread is inside an atomic write at that moment
(`decoders.records.atomic`: its temporary file not yet renamed or removed), the handler lets the
write finish and sends the signal again a moment later; after `WRITE_GRACE` seconds it leaves
anyway. Then `leave(code, line)` restores the terminal and ends the process (exit 143 for
SIGTERM, 129 for SIGHUP).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Callable

#: Seconds a signal waits for a file being written to be complete (renamed into place, or removed).
WRITE_GRACE = 1.0
#: Seconds between two looks at whether the write is done.
RECHECK = 0.02

LINES = {"SIGTERM": "tui-decode: terminated", "SIGHUP": "tui-decode: terminated (the terminal closed)"}


def writing_files(frames: dict[int, FrameType] | None = None) -> bool:
    """Whether a thread is inside `decoders.records.atomic` (a temporary file may be on disk)."""
    from decoders.records import atomic

    module_file = atomic.__file__
    for frame in (sys._current_frames() if frames is None else frames).values():
        at: FrameType | None = frame
        while at is not None:
            if at.f_code.co_filename == module_file:
                return True
            at = at.f_back
    return False


class SignalLeave:
    """The handler `leave_on_signals` installs; ``leave(code, line)`` must not return."""

    def __init__(self, leave: Callable[[int, str], None], writing: Callable[[], bool] = writing_files,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.leave = leave
        self.writing = writing
        self.clock = clock
        self.first: float | None = None  # when the first signal came

    def __call__(self, signum: int, frame: FrameType | None = None) -> None:
        now = self.clock()
        if self.first is None:
            self.first = now
        if self.writing() and now - self.first < WRITE_GRACE:
            self.again(signum)
            return
        name = signal.Signals(signum).name
        self.leave(128 + signum, LINES.get(name, f"tui-decode: terminated ({name})"))

    def again(self, signum: int) -> None:
        """The same signal in a moment, once the write in progress had time to end."""
        timer = threading.Timer(RECHECK, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()


def leave_on_signals(leave: Callable[[int, str], None]) -> SignalLeave | None:
    """Install `SignalLeave` for SIGTERM and SIGHUP (main thread, POSIX); None where it cannot."""
    handler = SignalLeave(leave)
    try:
        for name in ("SIGTERM", "SIGHUP"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), handler)
    except ValueError:  # not the main thread
        return None
    return handler
