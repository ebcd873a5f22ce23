"""Two writers at once and writers killed mid-write, with real processes: a folder's lock held by
another process (`held_elsewhere`), a Python snippet run in a process of its own that can be
killed at a named point (`run_python`, $TUI_DECODE_TEST_KILL_AT), the id of a process that is gone
(`dead_pid`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_HOLD = """
import sys
from decoders.records.folder import FolderLock
lock = FolderLock(sys.argv[1], sys.argv[2]).acquire()
print("held", flush=True)
sys.stdin.read()
lock.release()
"""


@contextmanager
def held_elsewhere(folder: Path, what: str = "the folder") -> Iterator[int]:
    """``folder``'s lock held by another process while the block runs; yields its process id."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder), what], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)


def run_python(code: str, *args: str, kill_at: str | None = None, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """``code`` in a Python process of its own (the repository first on its path), its argv
    ``args``; ``kill_at``: the hook point where it kills itself (SIGKILL, return code -9)."""
    full = dict(os.environ, **(env or {}))
    full.pop("TUI_DECODE_TEST_KILL_AT", None)
    if kill_at is not None:
        full["TUI_DECODE_TEST_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=timeout)


def dead_pid() -> int:
    """The id of a process that has ended (and been waited for)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)
