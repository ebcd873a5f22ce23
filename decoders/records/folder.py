"""One rule for every writer of more than one file (a training corpus, a head folder, a bench
report, a saved run and its screenshot):

* **one lock for the folder while it writes** (`FolderLock`): a second writer is told who holds it
  (process id, command, since when) and stops with one line (`FolderBusy`, exit 2), or waits for
  it when asked (``wait=True``, the command line's ``--wait``). The lock is the operating system's
  (``flock`` on ``.tui-decode.lock`` in the folder, removed when the writer is done): a writer
  killed in any way releases it, so there is never a stale lock to delete by hand;
* **the files of one result published together**: one file names the other's id and a reader
  checks it (`new_id`; a head's ``config.json`` names its weights' id, a bench's ``report.md``
  the id of its ``report.json``);
* **temporary files named with their process id** (`decoders.records.atomic` writes
  ``.tmp-NAME.PID.XXXX``) and removed at the next start once that process is gone (`sweep_temps`).

`kill_point` lets a test kill a writer at a named point between two renames (a test-only
environment variable, one dictionary look-up when unset).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from decoders.core.errors import DecodeError

LOCK_FILE = ".tui-decode.lock"
TEMP_PREFIX = ".tmp-"
KILL_ENV = "TUI_DECODE_TEST_KILL_AT"  # test-only: the writer kills itself (SIGKILL) at this hook point
OLD_TEMP_SECONDS = 3600.0  # a temporary file without a process id (an older version's) older than this is gone
_PID_TEMP = re.compile(r"^\.tmp-.+\.(?P<pid>\d+)\.[A-Za-z0-9_]{6,}$")

_held: dict[tuple[str, int], list] = {}  # (lock file, thread) -> [fd, count]: re-entrant in one thread
_held_guard = threading.Lock()


def kill_point(point: str) -> None:
    """Kill this process (SIGKILL: no handler, no clean-up) when $TUI_DECODE_TEST_KILL_AT names
    ``point`` (``point@N``: the N-th time it is passed): how the tests stop a writer between two
    renames."""
    wanted = os.environ.get(KILL_ENV)
    if not wanted:
        return
    name, _, nth = wanted.partition("@")
    if name != point:
        return
    _passed[point] = _passed.get(point, 0) + 1
    if _passed[point] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


_passed: dict[str, int] = {}


def new_id() -> str:
    """An id for one written result: when it was written and 48 random bits (``20261204-165001-3f9a...``)."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(6)}"


class FolderBusy(DecodeError):
    """Another process holds the folder's lock."""


def _command() -> str:
    argv = list(sys.argv) or ["python"]
    name = Path(argv[0]).name
    if name in ("__main__.py", "-c", "-m") or name.startswith("python"):
        name = "python"
    text = " ".join([name, *argv[1:]])
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= 160 else text[:157] + "..."


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says: ``process 123 (`tui-decode bench ...`) since 16:50:01 UTC``."""
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode("utf-8")) if raw else None
    except (OSError, ValueError):
        info = None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
        return "another process"
    command = str(info.get("command", ""))[:160]
    since = str(info.get("since", ""))[:40]
    return f"process {info['pid']}" + (f" (`{command}`)" if command else "") + (f" since {since}" if since else "")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, OSError):
        return False
    return True


class FolderLock:
    """The lock of one folder while this process writes into it; re-entrant within one thread
    (a corpus opened twice by the same command), exclusive across threads and processes.

    ``what`` names the folder in the message ("the corpus", "the head"); ``wait_hint`` says how
    to wait instead ("add --wait to wait for it"); ``on_wait`` hears one line when it waits."""

    def __init__(self, folder: str | os.PathLike, what: str, wait: bool = False,
                 wait_hint: str = "add --wait to wait for it", on_wait: Callable[[str], None] | None = None,
                 lock_name: str = LOCK_FILE, shown: str | os.PathLike | None = None):
        self.folder = Path(folder)
        self.lock_name = lock_name  # another name: one lock a file (a suffix memory), not the folder's
        self.shown = Path(shown) if shown is not None else self.folder  # what the message names
        self.what = what
        self.wait = wait
        self.wait_hint = wait_hint
        self.on_wait = on_wait
        self._key: tuple[str, int] | None = None

    def acquire(self) -> FolderLock:
        from decoders.records.atomic import write_error

        if self._key is not None:
            return self
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            key = (os.path.join(os.path.realpath(self.folder), self.lock_name), threading.get_ident())
        except OSError as err:
            raise write_error(self.folder, err, f"{self.what} folder") from None
        with _held_guard:
            if key in _held:
                _held[key][1] += 1
                self._key = key
                return self
        fd = self._lock_file()
        try:
            info = {"pid": os.getpid(), "command": _command(),
                    "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode("utf-8"), 0)
        except BaseException:
            os.close(fd)
            raise
        with _held_guard:
            _held[key] = [fd, 1]
        self._key = key
        return self

    def _lock_file(self) -> int:
        """An open descriptor of the folder's lock file, locked. The holder removes the file when it
        is done, so a lock taken on a file that is no longer the folder's is let go and taken again."""
        import fcntl

        path = self.folder / self.lock_name
        told = False
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as err:
                from decoders.records.atomic import write_error

                raise write_error(path, err, f"{self.what}'s lock") from None
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    busy = (f"{self.what[:1].upper()}{self.what[1:]} {self.shown} is being written by "
                            f"{_holder(fd)}")
                    if not self.wait:
                        raise FolderBusy(f"{busy}; wait for it to end, or {self.wait_hint}") from None
                    if self.on_wait is not None and not told:
                        self.on_wait(f"{busy}; waiting for it to end")
                        told = True
                    fcntl.flock(fd, fcntl.LOCK_EX)
                mine = os.fstat(fd)
                try:
                    now = os.stat(path)
                except FileNotFoundError:
                    now = None
                if now is not None and (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # the holder removed it as we waited: lock the folder's new one

    def release(self) -> None:
        key, self._key = self._key, None
        if key is None:
            return
        with _held_guard:
            entry = _held.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del _held[key]
        fd = entry[0]
        try:
            os.unlink(key[0])  # nothing left in the folder; a waiter locks anew
        except OSError:
            pass
        os.close(fd)  # releases the lock

    @property
    def held(self) -> bool:
        return self._key is not None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - at interpreter exit the modules may be gone
            pass


def sweep_temps(folder: str | os.PathLike[str], locked: bool = False, file_name: str | None = None) -> list[str]:
    """Remove the temporary files (``.tmp-*``) of writes whose process is gone (killed mid-write)
    from ``folder``; the names removed. A file of a live process is left alone; one without a
    process id in its name (an older version's) goes once it is an hour old, or at once when the
    caller holds the folder's lock (``locked``: no other writer can be half way). ``file_name``: only
    the temporary files of that one file (a folder that is not tui-decode's own: a suffix memory's)."""
    only = None if file_name is None else f"{TEMP_PREFIX}{file_name}."
    removed: list[str] = []
    try:
        entries = list(os.scandir(os.fspath(folder)))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        name = entry.name
        if not name.startswith(TEMP_PREFIX) or (only is not None and not name.startswith(only)):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            match = _PID_TEMP.match(name)
            if match:
                pid = int(match.group("pid"))
                if pid == os.getpid() or alive(pid):
                    continue
            elif not locked and now - entry.stat(follow_symlinks=False).st_mtime < OLD_TEMP_SECONDS:
                continue
            os.unlink(entry.path)
            removed.append(name)
        except OSError:
            continue
    return removed
