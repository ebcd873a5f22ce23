"""When something the tool did not expect goes wrong: the traceback into a crash report file (in
the user cache folder, or $TUI_DECODE_CACHE_DIR, else the temporary folder) and one line on
stderr naming it. Used by the command line and by the app alike."""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from decoders import __version__


def crash_dir() -> Path:
    """Where crash reports go: $TUI_DECODE_CACHE_DIR, else the user cache dir."""
    override = os.environ.get("TUI_DECODE_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("tui-decode"))


def write_crash_report(exc: BaseException, argv: Sequence[str] | None) -> Path | None:
    """The traceback of ``exc`` in ``crash-YYYYmmdd-HHMMSS.txt``; its path, or None if no folder took it."""
    import tempfile

    from decoders.records import atomic

    text = (f"tui-decode {__version__} crashed at {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
            f"command: {' '.join(map(repr, sys.argv[:1] + list(argv if argv is not None else sys.argv[1:])))}\n"
            f"python: {sys.version.split()[0]} on {sys.platform}\n\n"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    name = f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    folders = []
    try:
        folders.append(crash_dir())
    except Exception:
        pass
    folders.append(Path(tempfile.gettempdir()))
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            return atomic.write_text(folder / name, text.encode("utf-8", "backslashreplace").decode("utf-8"))
        except Exception:
            continue
    return None


def report_crash(exc: BaseException, argv: Sequence[str] | None) -> int:
    """One line naming the crash report (the traceback goes there, not to the screen); exit 1."""
    report = write_crash_report(exc, argv)
    where = f"details in {report}" if report else "no crash report could be written"
    print(f"tui-decode: internal error: {type(exc).__name__}: {_one_line(exc)} ({where}; please report it)",
          file=sys.stderr)
    return 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."
