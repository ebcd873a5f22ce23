"""Suffix decoding's memory across requests: the finished responses of a session in one suffix tree.

Every finished response of a suffix run joins the memory of its model (the baseline's runs never
do), bounded by a response count and a node count (its size in memory), the oldest evicted first.
A prompt never drafts from an earlier response to the same prompt: before a run drafts, the
memory forgets that prompt's responses (else a rerun, or the warm-up before a measured run, would
draft the very output the baseline gives: an oracle, not a draft).

With a file (``--suffix-memory PATH``) the memory is kept on disk for its model and tokenizer:
loaded when the model is, rewritten atomically after each response joins. A file that is damaged,
truncated, not a memory, or kept for another model or tokenizer is refused in one line and left
as it is. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import msgspec

from decoders.core.errors import DecodeError
from decoders.methods.shared.suffix_tree import SuffixTree

if TYPE_CHECKING:
    from decoders.models.family import Family

MAX_REQUESTS = 10_000  # responses kept (vLLM's default cache size)
MAX_NODES = 2_000_000  # suffix-tree nodes kept, the memory's size bound: about 270 bytes each (0.54 GB), measured
MAX_FILE_BYTES = 1 << 30  # the largest memory file read
MAX_RESPONSE_TOKENS = 1 << 20  # tokens of one response kept (the rest is cut)
FORMAT = "tui-decode suffix memory"
VERSION = 1
FIX = "delete it or give --suffix-memory another path to start a new memory"


class MemoryFile(msgspec.Struct, forbid_unknown_fields=True):
    """The file: what it is, whose it is, and the responses oldest first as (prompt key, tokens)."""

    format: str
    version: int
    identity: str  # the model and tokenizer it was built with (`identity`)
    model: str  # the model, in words, for the refusal message
    responses: list[tuple[str, list[int]]]


@dataclass
class Entry:
    prompt: str  # the prompt's key (`prompt_key`); "" for a corpus document
    tokens: list[int]


def prompt_key(prompt_ids: Sequence[int]) -> str:
    """A short digest of the prompt's token ids: the same prompt gives the same key."""
    return hashlib.sha256(",".join(map(str, prompt_ids)).encode()).hexdigest()[:20]


class SuffixMemory:
    """Responses oldest first in one suffix tree, within a response count and a node count."""

    def __init__(self, depth: int, max_requests: int = MAX_REQUESTS, max_nodes: int = MAX_NODES,
                 identity: str = "", model: str = ""):
        self.depth = depth
        self.max_requests, self.max_nodes = max_requests, max_nodes
        self.identity, self.model = identity, model
        self.tree = SuffixTree(depth)
        self.entries: OrderedDict[int, Entry] = OrderedDict()
        self._next = 0
        self.tokens = 0
        self.evicted = 0
        self.path: Path | None = None  # where it is kept, when it is

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def nodes(self) -> int:
        return self.tree.nodes

    def forget(self, prompt: str) -> int:
        """Remove every response to ``prompt``; how many were removed."""
        gone = [i for i, e in self.entries.items() if e.prompt == prompt and prompt]
        for i in gone:
            self._drop(i)
        return len(gone)

    def add(self, prompt: str, tokens: Sequence[int]) -> None:
        """A finished response joins (replacing an earlier response to the same prompt); the oldest
        are evicted while the memory is over its bounds (the newest always stays)."""
        if prompt:
            self.forget(prompt)
        tokens = list(tokens[:MAX_RESPONSE_TOKENS])
        if not tokens:
            return
        self.tree.add(tokens)
        self.entries[self._next] = Entry(prompt, tokens)
        self._next += 1
        self.tokens += len(tokens)
        while len(self.entries) > 1 and (len(self.entries) > self.max_requests or self.tree.nodes > self.max_nodes):
            self._drop(next(iter(self.entries)))
            self.evicted += 1

    def _drop(self, i: int) -> None:
        entry = self.entries.pop(i)
        self.tree.remove(entry.tokens)
        self.tokens -= len(entry.tokens)

    def with_depth(self, depth: int) -> None:
        """Rebuild the tree at another depth (a run asked for one), keeping the responses."""
        if depth == self.depth:
            return
        self.depth, self.tree = depth, SuffixTree(depth)
        for entry in self.entries.values():
            self.tree.add(entry.tokens)

    # files ------------------------------------------------------------------------------------
    def dumps(self) -> bytes:
        return msgspec.json.encode(MemoryFile(FORMAT, VERSION, self.identity, self.model,
                                              [(e.prompt, e.tokens) for e in self.entries.values()]))

    def save(self, path: str | Path | None = None) -> None:
        from decoders.records.atomic import write_bytes

        target = path or self.path
        if target is not None:
            write_bytes(target, self.dumps(), "the suffix memory")

    def load(self, path: str | Path, vocab_size: int) -> None:
        """Fill from ``path`` (kept for this identity); DecodeError in one line, the file untouched
        and this memory unchanged, when it is not a memory for this model and tokenizer."""
        from decoders.records.inputs import read_bytes

        data = read_bytes(path, "the suffix memory", MAX_FILE_BYTES, FIX)
        try:
            kept = msgspec.json.decode(data, type=MemoryFile)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            raise DecodeError(f"the suffix memory {path} is damaged or not a memory file ({_first_line(err)}); "
                              f"{FIX}") from None
        if kept.format != FORMAT or kept.version != VERSION:
            raise DecodeError(f"{path} is not a suffix memory of this version (format {kept.format[:60]!r}, "
                              f"version {kept.version}); {FIX}")
        if kept.identity != self.identity:
            raise DecodeError(f"the suffix memory {path} was built for another model or tokenizer "
                              f"({kept.model[:120]}), not {self.model[:120]}; {FIX}")
        for i, (_, tokens) in enumerate(kept.responses):
            bad = next((t for t in tokens if not 0 <= t < vocab_size), None)
            if bad is not None:
                raise DecodeError(f"the suffix memory {path} is damaged: response {i} holds token id {bad}, "
                                  f"outside this tokenizer's {vocab_size} ids; {FIX}")
        fresh = SuffixMemory(self.depth, self.max_requests, self.max_nodes, self.identity, self.model)
        for prompt, tokens in kept.responses:
            fresh.add(prompt, tokens)
        self.tree, self.entries, self._next, self.tokens = fresh.tree, fresh.entries, fresh._next, fresh.tokens
        self.evicted = fresh.evicted
        self.path = Path(path)

    def figures(self) -> dict[str, Any]:
        return {"responses": len(self.entries), "tokens": self.tokens, "nodes": self.tree.nodes,
                "evicted": self.evicted}


def _first_line(err: Exception) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0][:200]


# --- one memory per loaded model -----------------------------------------------------------------
_MEMORIES: dict[int, tuple[weakref.ref, SuffixMemory]] = {}


def identity(family: Family) -> tuple[str, str]:
    """(digest, words) naming the model and the tokenizer: a memory from another is refused."""
    display = [family.display(i) for i in range(family.vocab_size)]
    digest = hashlib.sha256("\x00".join(display).encode("utf-8", "replace")).hexdigest()[:16]
    words = f"{family.main_source}, {family.vocab_size} tokens, tokenizer {digest}"
    return hashlib.sha256(f"{family.main_source}|{family.vocab_size}|{digest}".encode()).hexdigest()[:24], words


def memory_for(family: Family, depth: int) -> SuffixMemory:
    """The memory of ``family`` (made empty the first time), at ``depth``."""
    key = id(family)
    held = _MEMORIES.get(key)
    if held is not None and held[0]() is family:
        memory = held[1]
        memory.with_depth(depth)
        return memory
    ident, words = identity(family)
    memory = SuffixMemory(depth, identity=ident, model=words)
    _MEMORIES[key] = (weakref.ref(family), memory)
    return memory


def open_memory_file(family: Family, path: str, depth: int) -> SuffixMemory:
    """Keep ``family``'s memory in ``path``: load it when the file exists (refused in one line when
    it is not this model's memory), and write it there after each response joins."""
    from decoders.records.atomic import check_destination

    memory = memory_for(family, depth)
    if Path(path).exists():
        memory.load(path, family.vocab_size)
    else:
        check_destination(path, "--suffix-memory", "the suffix memory")
    memory.path = Path(path)
    return memory


def reset_memories() -> None:
    """Forget every model's memory (tests)."""
    _MEMORIES.clear()


def timed_add(memory: SuffixMemory, prompt: str, tokens: Sequence[int]) -> float:
    """Add and save; the seconds it took (the memory update's cost, reported beside the run)."""
    t0 = time.perf_counter()
    memory.add(prompt, tokens)
    memory.save()
    return time.perf_counter() - t0
