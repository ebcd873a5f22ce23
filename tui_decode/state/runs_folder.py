"""Where ctrl+s saves runs and ctrl+o finds them: the runs folder, file names that never overwrite,
and the saved runs newest first."""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable
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


def write_new(folder: Path, stem: str, suffix: str, write: Callable[[Path], object]) -> Path:
    """``write(path)`` (an exclusive atomic write) at ``folder/stem+suffix``, or at stem-2, -3, ...
    when another save (this session's or another process's) took that name first: two saves in
    one second never write over each other. The temporary files of saves killed mid-write (their
    process gone) are removed first."""
    from decoders.records.folder import sweep_temps

    sweep_temps(folder)
    for n in range(1, 1000):
        path = folder / f"{stem if n == 1 else f'{stem}-{n}'}{suffix}"
        try:
            write(path)
            return path
        except OSError as error:  # atomic.WriteError is one
            if error.errno != errno.EEXIST:
                raise
    raise OSError(errno.EEXIST, f"{stem}-2 .. {stem}-999{suffix} are all taken", str(folder))


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
