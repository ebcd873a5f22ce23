"""The one exception type that reaches the user: a single line saying what was wrong and how to fix it."""

from __future__ import annotations


class DecodeError(Exception):
    """A problem the user can fix (bad parameter, unreadable model source, hub unreachable, ...).

    ``str(err)`` is one line, shown as-is by the command line (exit code 2) and the app (a
    notification). Anything else that escapes the engine is a bug.
    """

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))
