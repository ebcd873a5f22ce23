"""The one exception type that reaches the user: a single line saying what was wrong and how to fix it."""

from __future__ import annotations

import re

#: How much of a value a user handed over an error line echoes: a 200 kB flag value, file name or
#: file field must not fill the terminal. A value is cut to its first `MOST_VALUE` characters, a
#: path (or any other run of characters without a space) to `MOST_RUN`, a whole line to `MOST_LINE`.
MOST_VALUE = 60
MOST_RUN = 400
MOST_LINE = 2000
_QUOTED = re.compile(r"'[^'\s]{%d,}'|\"[^\"\s]{%d,}\"" % (MOST_VALUE + 1, MOST_VALUE + 1))
_RUN = re.compile(r"\S{%d,}" % (MOST_RUN + 1))
#: Characters that would act on the terminal rather than show (ESC starts a control sequence, the
#: bidirectional overrides reorder what follows): shown escaped.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(value: object, most: int = MOST_VALUE) -> str:
    """``value`` as an error line quotes it: its repr, cut to its first ``most`` characters with
    "…" and its length when longer."""
    text = str(value)
    if len(text) <= most:
        return repr(text)
    return f"{text[:most]!r}… ({len(text)} characters)"


def one_line(message: str) -> str:
    """``message`` as one short line: whitespace runs as one space, terminal control characters
    escaped, every long value cut short (see `MOST_VALUE`), the whole at most `MOST_LINE`
    characters (its start and its end, where the fix is, kept)."""
    text = " ".join(message.split())
    text = _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)
    text = _QUOTED.sub(lambda m: shown(m.group(0)[1:-1]), text)
    text = _RUN.sub(_cut_run, text)
    if len(text) > MOST_LINE:
        cut = len(text) - MOST_LINE
        text = f"{text[:MOST_LINE // 2]} … ({cut} characters left out) … {text[-MOST_LINE // 2:]}"
    return text


def _cut_run(match: re.Match[str]) -> str:
    """A long run of characters without a space (a path) cut short; the punctuation after it kept."""
    run = match.group(0)
    end = run[-1] if run[-1] in ":;,." else ""
    run = run[:len(run) - len(end)]
    return f"{run[:MOST_RUN]}… ({len(run)} characters){end}"


class DecodeError(Exception):
    """A problem the user can fix (bad parameter, unreadable model source, hub unreachable, ...).

    ``str(err)`` is one line (`one_line`), shown as-is by the command line (exit code 2) and the
    app (a notification). Anything else that escapes the engine is a bug.
    """

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(one_line(message))
