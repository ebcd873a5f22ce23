"""Reading text a user hands over (prompt files, config files, prompt lists): bounded in size and
checked to be UTF-8, every failure one line naming the file and what to do.

A file is read up to a bound and never further, so a 2 GB file costs a few MB of memory and a
clear message, not the machine; a device such as `/dev/zero` is refused unread.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

from decoders.core.errors import DecodeError

#: Prompts: a model's context is at most a few hundred thousand tokens; 4 MiB of text is far more.
MAX_PROMPT_BYTES = 4 << 20
#: Config files.
MAX_CONFIG_BYTES = 1 << 20
#: Prompt lists (the bench's JSONL files; Spec-Bench's full set is about 0.5 MB).
MAX_PROMPTS_BYTES = 64 << 20


def _size_words(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


class NoWriterError(OSError):
    """A FIFO that no process writes to: reading it would wait forever."""

    def __init__(self, path: os.PathLike | str):
        super().__init__(errno.EAGAIN, "it is a FIFO (named pipe) that nothing writes to; start the writer first "
                                       "or give a regular file", str(path))


class NotAFileError(OSError):
    """A device that is not a terminal (``/dev/zero``, a disk): no file, and reading it to the
    bound costs its whole bound (4 GB of zeros for a memory file) before the refusal."""

    def __init__(self, path: os.PathLike | str, kind: str):
        super().__init__(errno.EINVAL, f"it is a {kind}, not a file", str(path))


def read_upto(path: str | os.PathLike, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``. A FIFO is opened without waiting for a writer: one with
    none is `NoWriterError`, not a read that never ends; a pipe being written to (``/dev/stdin``
    of ``echo hi |``) is read as usual, and so is a terminal; any other device is `NotAFileError`,
    unread. OSError as `open` and `read` raise them."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if (stat.S_ISCHR(mode) and not os.isatty(fd)) or stat.S_ISBLK(mode):
            raise NotAFileError(path, "character device" if stat.S_ISCHR(mode) else "block device")
        if stat.S_ISFIFO(mode):
            first, writer = b"", False
            for _ in range(10):  # a writer waiting in its own open() gets a moment to arrive
                try:
                    first = os.read(fd, min(limit + 1, 1 << 16))
                except BlockingIOError:  # a writer is there, nothing written yet
                    writer = True
                    break
                if first:
                    writer = True
                    break
                time.sleep(0.02)
            if not writer:
                raise NoWriterError(path)
            os.set_blocking(fd, True)
            with os.fdopen(os.dup(fd), "rb") as handle:
                return first + handle.read(limit + 1 - len(first))
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(limit + 1)
    finally:
        os.close(fd)


def read_bytes(path: str | os.PathLike, what: str, limit: int, fix: str) -> bytes:
    """At most ``limit`` bytes of ``path``; DecodeError if it is larger, missing, a folder or unreadable.

    ``what`` names the file ("the prompt file"); ``fix`` ends each message.
    """
    path = Path(path)
    try:
        data = read_upto(path, limit)
    except FileNotFoundError:
        raise DecodeError(f"cannot read {what} {path}: it does not exist; {fix}") from None
    except IsADirectoryError:
        raise DecodeError(f"cannot read {what} {path}: it is a folder; {fix}") from None
    except OSError as err:
        raise DecodeError(f"cannot read {what} {path}: {err.strerror or err}; {fix}") from None
    if len(data) > limit:
        raise DecodeError(f"{what} {path} is larger than {_size_words(limit)}, the most that is read "
                          f"(stopped reading there); {fix}")
    return data


def decode_utf8(data: bytes, what: str, fix: str) -> str:
    """``data`` as UTF-8 text (a leading BOM dropped); DecodeError naming the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        hint = ""
        if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            hint = " (it looks like UTF-16)"
        raise DecodeError(f"{what} is not UTF-8 text{hint}: byte {data[err.start]:#04x} at offset {err.start} "
                          f"cannot be decoded; save it as UTF-8, {fix}") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | os.PathLike, what: str, limit: int, fix: str) -> str:
    """`read_bytes` then `decode_utf8`."""
    return decode_utf8(read_bytes(path, what, limit, fix), f"{what} {path}", fix)


def check_text(text: str, what: str, fix: str) -> str:
    """``text`` if it can be encoded as UTF-8 (no lone surrogates, which is what undecodable bytes
    in a command-line argument become); DecodeError otherwise."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise DecodeError(f"{what} is not valid UTF-8 text: character {err.start} ({text[err.start]!a}) comes "
                          f"from bytes that are not UTF-8; {fix}") from None
    return text
