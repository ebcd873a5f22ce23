"""Where ctrl+s saves runs and ctrl+o finds them: the runs folder, file names that never overwrite,
and the saved runs newest first."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from decoders.records.run import RunResult

RUNS_DIR_ENV = "TUI_DECODE_RUNS_DIR"


def runs_dir() -> Path:
    """Where ctrl+s saves runs: $TUI_DECODE_RUNS_DIR, else the user data dir's ``runs`` folder."""
    override = os.environ.get(RUNS_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("tui-decode")) / "runs"


def run_file_stem(result: RunResult, folder: Path, now: float | None = None) -> str:
    """A file name (no suffix) that sorts by time, says which method it holds and is not taken
    in ``folder`` (two saves in one second get -2, -3, ...)."""
    stem = f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}-{result.method.method}"
    candidate, n = stem, 1
    while (folder / f"{candidate}.json").exists():
        n += 1
        candidate = f"{stem}-{n}"
    return candidate


def saved_runs(folder: Path) -> list[Path]:
    """Saved run files in ``folder``, newest first: regular files only (a dangling symlink, a
    folder or a FIFO named ``*.json`` is not a run, and opening a FIFO would wait forever)."""
    try:
        if not folder.is_dir():
            return []
        found = []
        for path in folder.glob("*.json"):
            try:
                info = path.stat()
            except OSError:  # a dangling or looping symlink, a name too long, a file gone meanwhile
                continue
            if stat.S_ISREG(info.st_mode):
                found.append((info.st_mtime, path))
    except OSError:
        return []
    return [path for _, path in sorted(found, key=lambda pair: pair[0], reverse=True)]
