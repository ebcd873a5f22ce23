"""The suffix memory's file (``--suffix-memory PATH``): its format (`MemoryFile`: msgpack, the
tree's arrays and the responses under a digest; version 1 was JSON, the responses only), read and
checked in one line (`check_memory_file`) before anything trusts it. Nothing here imports torch."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec

from decoders.core.errors import DecodeError
from decoders.methods.shared.suffix_tree import BYTES_PER_NODE, FIELDS

MAX_MB = 16_384  # the largest size bound one may ask for (16 GB)
#: the largest memory file read: the largest tree's arrays (a node: one 4-byte entry per array)
#: and its responses (a token: a few bytes of msgpack) with room to spare
MAX_FILE_BYTES = MAX_MB * 1_000_000 // BYTES_PER_NODE * 4 * len(FIELDS) + (512 << 20)
FORMAT = "tui-decode suffix memory"
VERSION = 2  # 1: JSON, the responses only (read, and rebuilt)
FLAG = "--suffix-memory"  # the flag a memory file is given with (`datastore build`: --out)


def memory_fix(flag: str = FLAG) -> str:
    """What to do with a memory file that cannot be used, naming the flag the user gave."""
    return f"delete it or give {flag} another path to start a new memory"


FIX = memory_fix()


class TreeFile(msgspec.Struct, forbid_unknown_fields=True):
    """The tree as its arrays (`SuffixTree.to_parts`), at its depth, with its node count."""

    depth: int
    nodes: int
    arrays: list[bytes]
    free: list[int]


class MemoryFile(msgspec.Struct, forbid_unknown_fields=True):
    """The file: what it is, whose it is, and the responses oldest first as (prompt key, tokens);
    from version 2 on also the tree and a digest over both (msgpack, not JSON)."""

    format: str
    version: int
    identity: str  # the model and tokenizer it was built with (`identity`)
    model: str  # the model, in words, for the refusal message
    responses: list[tuple[str, list[int]]]
    tree: TreeFile | None = None
    digest: str = ""


def digest(kept: MemoryFile) -> str:
    h = hashlib.sha256()
    h.update(msgspec.msgpack.encode([kept.format, kept.version, kept.identity, kept.model, kept.responses]))
    if kept.tree is not None:
        h.update(msgspec.msgpack.encode([kept.tree.depth, kept.tree.nodes, kept.tree.free]))
        for part in kept.tree.arrays:
            h.update(part)
    return h.hexdigest()


def nodes_for_mb(mb: float) -> int:
    """The node bound of a memory of ``mb`` megabytes (at the measured `BYTES_PER_NODE`)."""
    return int(mb * 1_000_000 // BYTES_PER_NODE)


def mb_for_nodes(nodes: int) -> float:
    return nodes * BYTES_PER_NODE / 1_000_000


def read_memory_file(path: str | Path) -> MemoryFile:
    """The file as it is kept (either version), no checks beyond its shape: tests and tools."""
    from decoders.records.inputs import read_bytes

    return decode(read_bytes(path, "the suffix memory", MAX_FILE_BYTES, FIX), path)


def decode(data: bytes, path: str | Path, flag: str = FLAG) -> MemoryFile:
    try:
        if data[:1] == b"{":  # version 1 was JSON
            return msgspec.json.decode(data, type=MemoryFile)
        return msgspec.msgpack.decode(data, type=MemoryFile)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        if b"format" not in data[:16]:  # not a memory at all (notes, a corpus): never "delete it"
            raise DecodeError(f"{path} is not a suffix memory file ({_first_line(err)}); it was left as it is: "
                              "give the path of a memory file, or a new path to start one") from None
        raise DecodeError(f"the suffix memory {path} is damaged or not a memory file ({_first_line(err)}); "
                          f"{memory_fix(flag)}") from None


def check_memory_file(path: str | Path, flag: str = FLAG) -> MemoryFile | None:
    """The memory file at ``path`` read and its digest checked, before a model loads (whose model
    it is is checked when one has: `SuffixMemory.load`); DecodeError in one line when damaged, or
    not a file at all (a device, a FIFO: refused unread). None: an empty file, a new memory
    (nothing in it to lose: written after the run, as a missing file is)."""
    from decoders.records.inputs import read_bytes

    check_is_file(path, flag)
    data = read_bytes(path, "the suffix memory", MAX_FILE_BYTES, memory_fix(flag))
    if not data:
        return None
    kept = decode(data, path, flag)
    check_kept(kept, path, flag)
    return kept


def check_is_file(path: str | Path, flag: str = FLAG) -> None:
    """DecodeError, at once, when ``path`` is there but not a file: /dev/zero was read to 4 GB
    before its refusal, a FIFO cannot be rewritten, and a folder is never "delete it"."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing, unreadable: said by the read
    kinds = ((stat.S_ISDIR, "folder"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
             (stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISSOCK, "socket"))
    kind = next((name for test, name in kinds if test(mode)), None)
    if kind is not None:
        raise DecodeError(f"the suffix memory {path} is not a file but a {kind}; it was left as it is: give {flag} "
                          "the path of a memory file, or a new path to start one")


def check_kept(kept: MemoryFile, path: str | Path, flag: str = FLAG) -> None:
    if kept.format != FORMAT or kept.version not in (1, VERSION):
        raise DecodeError(f"{path} is not a suffix memory of this version (format {kept.format[:60]!r}, "
                          f"version {kept.version}); {memory_fix(flag)}")
    if kept.version == VERSION and (kept.tree is None or kept.digest != digest(kept)):
        raise DecodeError(f"the suffix memory {path} is damaged (its digest does not match what it holds); "
                          f"{memory_fix(flag)}")


def check_bounds(kept: MemoryFile, path: str | Path, max_requests: int, max_nodes: int, flag: str = FLAG) -> None:
    """DecodeError when the file holds more responses or tree nodes than a memory's bounds (the
    tree as kept: one of another depth is rebuilt, and checked again then)."""
    over = (f"{len(kept.responses)} responses, more than this memory's bound of {max_requests}"
            if len(kept.responses) > max_requests else
            f"a tree of {kept.tree.nodes:,} nodes (about {mb_for_nodes(kept.tree.nodes):,.0f} MB), more than "
            f"this memory's bound of {max_nodes:,} ({mb_for_nodes(max_nodes):,.0f} MB)"
            if kept.tree is not None and kept.tree.nodes > max_nodes else None)
    if over:
        raise DecodeError(f"the suffix memory {path} holds {over}; give a larger --suffix-memory-mb "
                          f"(at most {MAX_MB}) or {memory_fix(flag)}")


def _first_line(err: Exception) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0][:200]


_LOCKS: dict[str, Any] = {}  # the memory files this process keeps: their locks, held until it ends


def lock_memory_file(path: str | Path, flag: str = FLAG) -> None:
    """Hold ``path``'s lock for the rest of this process (one process a memory file: two that read
    it, each adding its own responses and rewriting the whole file, lost the first one's); a
    second process is told who holds it (`FolderBusy`, one line, exit 2). Its lock file
    (``.NAME.tui-decode.lock`` beside it) goes when the process ends; the temporary files of its
    writes killed half way go when the next process takes the lock."""
    import atexit
    import os

    from decoders.records.atomic import WriteError, reason, shown_path
    from decoders.records.folder import FolderLock, sweep_temps

    key = os.path.realpath(path)
    if key in _LOCKS:
        return
    where = Path(path)
    lock = FolderLock(where.parent, "the suffix memory", wait_hint=f"give {flag} another path",
                      lock_name=f".{where.name}.tui-decode.lock", shown=where)
    try:
        lock.acquire()
    except WriteError as err:  # no lock file can be made: nor could the memory be rewritten
        raise DecodeError(f"the suffix memory {shown_path(path)} cannot be kept: its folder cannot be written "
                          f"({reason(err)}), and the memory is rewritten after each run; copy it to a writable "
                          f"folder, or give {flag} another path") from None
    real = Path(key)  # a write killed half way (its process gone) left its temporary file beside it
    sweep_temps(real.parent, file_name=real.name)
    if not _LOCKS:
        atexit.register(release_locks)
    _LOCKS[key] = lock


def release_locks() -> None:
    while _LOCKS:
        _LOCKS.popitem()[1].release()
