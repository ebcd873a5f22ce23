"""The app and its terminal (issue 40): no start without one; SIGTERM and SIGHUP end it within
seconds whatever its queue holds, leaving no temporary file; a paste delivered key by key is one
paste. The processes here run the real app in a pseudo-terminal of their own."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decoders.records.run import RunResult
from tui_decode.state.leaving import WRITE_GRACE, SignalLeave

REPO = Path(__file__).resolve().parents[2]
RUN_DATA = REPO / "tests" / "data" / "run_spec.json"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and pseudo-terminals")


def environment(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), TERM="xterm-256color", HOME=str(tmp_path), HF_HUB_OFFLINE="1",
                TUI_DECODE_CACHE_DIR=str(tmp_path / "cache"), TUI_DECODE_CONFIG_DIR=str(tmp_path / "config"),
                TUI_DECODE_RUNS_DIR=str(tmp_path / "runs"))


# -- no terminal -----------------------------------------------------------------------------------
NO_TERMINAL = ("tui-decode: error: the app needs a terminal, and its standard {} is not one (redirected or "
               "closed); run it in a terminal, or decode without one with `tui-decode run --prompt TEXT`\n")


@pytest.mark.slow  # a process of its own
@pytest.mark.parametrize("missing", ["input", "output"])
def test_the_app_without_a_terminal_refuses_to_start_in_one_line(tmp_path, missing):
    """`tui-decode < /dev/null` spun at 100% CPU reading end-of-file, out of ctrl+q's reach, and
    with its output redirected it wrote escape sequences into the file until killed."""
    master, slave = pty.openpty()
    streams = {"stdin": slave, "stdout": slave}
    if missing == "input":
        streams["stdin"] = subprocess.DEVNULL
    else:
        streams["stdout"] = (tmp_path / "out").open("wb")
    try:
        proc = subprocess.run([sys.executable, "-m", "tui_decode", "--open", str(RUN_DATA)], **streams,
                              stderr=subprocess.PIPE, env=environment(tmp_path), cwd=tmp_path, timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 2
    assert proc.stderr.decode() == NO_TERMINAL.format(missing)
    if missing == "output":
        assert (tmp_path / "out").read_bytes() == b""


# -- signals -----------------------------------------------------------------------------------------
def test_a_signal_waits_for_a_file_being_written_then_leaves():
    """The handler itself: while a thread is inside an atomic write it sends the signal again a
    moment later; once the write is done, or after the grace, it leaves with 128 + the signal."""
    now, writing, again, left = [0.0], [True], [], []
    handler = SignalLeave(lambda code, line: left.append((code, line)), lambda: writing[0], lambda: now[0])
    handler.again = again.append  # type: ignore[method-assign]
    handler(signal.SIGHUP)
    now[0] = 0.3
    handler(signal.SIGHUP)
    assert again == [signal.SIGHUP, signal.SIGHUP] and left == []
    writing[0] = False
    handler(signal.SIGHUP)
    assert left == [(129, "tui-decode: terminated (the terminal closed)")]
    stuck = SignalLeave(lambda code, line: left.append((code, line)), lambda: True, lambda: now[0])
    stuck.again = again.append  # type: ignore[method-assign]
    stuck(signal.SIGTERM)
    now[0] += WRITE_GRACE
    stuck(signal.SIGTERM)  # a write that never ends holds the exit no longer than the grace
    assert left[-1] == (143, "tui-decode: terminated")


def test_writing_files_sees_a_thread_inside_an_atomic_write(tmp_path, monkeypatch):
    import threading

    from decoders.records import atomic
    from tui_decode.state.leaving import writing_files

    inside, release = threading.Event(), threading.Event()
    real = atomic._write_all

    def held(handle, data):
        inside.set()
        release.wait(10)
        real(handle, data)

    monkeypatch.setattr(atomic, "_write_all", held)
    writer = threading.Thread(target=atomic.write_text, args=(tmp_path / "f.txt", "x"))
    assert not writing_files()
    writer.start()
    assert inside.wait(10)
    try:
        assert writing_files()
    finally:
        release.set()
        writer.join()
    assert not writing_files() and (tmp_path / "f.txt").read_text() == "x"


class Terminal:
    """A child process in a pseudo-terminal of its own (120x40), and what it has drawn."""

    def __init__(self, argv: list[str], tmp_path: Path) -> None:
        import fcntl
        import struct
        import termios

        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=environment(tmp_path),
                                     cwd=tmp_path, start_new_session=True)
        os.close(slave)
        self.screen = b""

    def read(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if select.select([self.master], [], [], 0.02)[0]:
                try:
                    self.screen += os.read(self.master, 1 << 16)
                except OSError:  # the child closed the terminal
                    time.sleep(0.02)

    def wait_for(self, text: bytes, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while text not in self.screen:
            assert self.proc.poll() is None and time.monotonic() < deadline, self.screen[-2000:]
            self.read(0.1)

    def write(self, data: bytes, seconds: float = 120) -> None:
        """``data`` typed into the terminal, reading what the app draws meanwhile (a full pty would
        block); the app must have read it all within ``seconds``."""
        view = memoryview(data)
        deadline = time.monotonic() + seconds
        while view:
            assert time.monotonic() < deadline, f"the app read {len(data) - len(view)} of {len(data)} bytes in {seconds} s"
            _, writable, _ = select.select([self.master], [self.master], [], 0.1)
            if writable:
                view = view[os.write(self.master, view[:4096]):]
            self.read(0)

    def ended_within(self, seconds: float) -> float | None:
        """Seconds until the process ended, or None if it had not within ``seconds``."""
        started = time.monotonic()
        while self.proc.poll() is None and time.monotonic() - started < seconds:
            self.read(0.02)
        return time.monotonic() - started if self.proc.poll() is not None else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.master)


def temporary_files(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob(".tmp-*")] if folder.exists() else []


@pytest.mark.slow  # a process of its own, and thousands of keys
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_the_app_at_once_whatever_its_queue_holds(tmp_path, sig):
    """SIGTERM waited behind every key already read (a paste delivered key by key: not acted on
    65 s later); SIGHUP (the terminal closed) had no handler at all."""
    term = Terminal([sys.executable, "-m", "tui_decode", "--open", str(RUN_DATA)], tmp_path)
    try:
        term.wait_for(b"opened run_spec.json")
        term.read(0.3)
        term.write(b"\x1b[B\x1b[A" * 15000)  # 30,000 arrow keys, each its own event: the queue is long
        os.kill(term.proc.pid, sig)
        elapsed = term.ended_within(60)
    finally:
        term.close()
    print(f"{signal.Signals(sig).name} with 30,000 keys queued: the app ended in "
          f"{'more than 60 s' if elapsed is None else f'{1000 * elapsed:.0f} ms'}")
    assert elapsed is not None and elapsed < 5, "the app did not leave within 5 s"  # about 0.1 s measured
    assert term.proc.returncode == 128 + sig
    assert b"Traceback" not in term.screen and b"tui-decode: terminated" in term.screen
    assert temporary_files(tmp_path) == [] and not list((tmp_path / "cache").glob("crash-*.txt"))


SLOW_SAVE = """
import os, sys, time
from pathlib import Path
from decoders.records import atomic

real = atomic._write_all
calls = []

def half_then_wait(handle, data):  # the run's JSON half written into its temporary file
    calls.append(data)
    if len(calls) > 1:  # the screenshot: as ever
        return real(handle, data)
    real(handle, data[: len(data) // 2])
    handle.flush()
    Path(os.environ["TUI_DECODE_RUNS_DIR"], "..", "half-written").resolve().write_text("now")
    time.sleep(0.4)
    real(handle, data[len(data) // 2:])

atomic._write_all = half_then_wait
from tui_decode.cli.main import main
sys.exit(main(["--open", sys.argv[1]]))
"""


@pytest.mark.slow  # a process of its own
def test_sighup_in_the_middle_of_a_save_leaves_no_temporary_file(tmp_path):
    """Closing the terminal while ctrl+s writes: the write ends (the run saved whole, or not at all),
    then the app leaves; it used to die at once, its `.tmp-*.json.*` left in the runs folder."""
    (tmp_path / "runs").mkdir()
    term = Terminal([sys.executable, "-c", SLOW_SAVE, str(RUN_DATA)], tmp_path)
    try:
        term.wait_for(b"opened run_spec.json")
        term.read(0.3)
        term.write(b"\x13")  # ctrl+s
        deadline = time.monotonic() + 60
        while not (tmp_path / "half-written").exists():
            assert term.proc.poll() is None and time.monotonic() < deadline, term.screen[-2000:]
            term.read(0.01)
        os.kill(term.proc.pid, signal.SIGHUP)
        elapsed = term.ended_within(30)
    finally:
        term.close()
    assert elapsed is not None and elapsed < 5, "the app did not leave within 5 s"
    assert term.proc.returncode == 129, term.screen[-2000:]
    assert temporary_files(tmp_path) == []
    for saved in (tmp_path / "runs").glob("*.json"):
        assert RunResult.load(saved).prompt == RunResult.load(RUN_DATA).prompt  # whole


# -- a paste delivered key by key -----------------------------------------------------------------------
KEEP_THE_PROMPT = """
import sys
from pathlib import Path
import tui_decode.app as app_module

app_module.LEAVE_AT_ONCE = False  # the app's widgets outlive it here, to be read
apps = []
real_init = app_module.TuiDecodeApp.__init__

def init(self, *args, **kwargs):
    apps.append(self)
    real_init(self, *args, **kwargs)

app_module.TuiDecodeApp.__init__ = init
from tui_decode.cli.main import main
code = main(["--open", sys.argv[1]])
Path(sys.argv[2]).write_text(apps[0].main_screen.prompt_pane.editor.text)
sys.exit(code)
"""


@pytest.mark.slow  # a process of its own, and a megabyte of keys
def test_a_megabyte_pasted_key_by_key_is_one_paste_and_the_app_answers_soon_after(tmp_path):
    """A 1 MB paste without bracketed paste was still being inserted after 3 minutes, the app's
    memory rising by 20 MB/s; ctrl+q waited behind it. Read as one paste, it is in the prompt and
    ctrl+q ends the app within seconds."""
    prompt = tmp_path / "prompt.txt"
    term = Terminal([sys.executable, "-c", KEEP_THE_PROMPT, str(RUN_DATA), str(prompt)], tmp_path)
    text = ("lorem ipsum dolor sit amet " * 40 + "\r") * 960  # 1,037,760 characters, 960 lines
    try:
        term.wait_for(b"opened run_spec.json")
        term.write(b"e")  # the prompt editor
        term.read(0.5)
        started = time.monotonic()
        term.write(text.encode())
        written = time.monotonic() - started
        term.read(0.2)
        peak = peak_memory(term.proc.pid)
        term.write(b"\x11")  # ctrl+q
        elapsed = term.ended_within(120)
    finally:
        term.close()
    ended = "after more than 120 s" if elapsed is None else f"{elapsed:.1f} s after ctrl+q"
    print(f"1 MB pasted key by key: written in {written:.1f} s, peak memory {peak}; the app ended {ended}")
    assert elapsed is not None, "the app was still busy with the paste 120 s after it"
    assert term.proc.returncode == 0 and b"Traceback" not in term.screen
    assert text.replace("\r", "\n") in prompt.read_text()  # the paste whole, one newline per line


def peak_memory(pid: int) -> str:
    try:
        return next(line.split(":")[1].strip() for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return "unknown"
