"""Suffix decoding's memory across requests: the finished responses of a session in one suffix tree.

Every finished response of the session joins the memory of its model, whatever method made it
(`decoders.engine.Engine` adds it after the run and its baseline stopped; a baseline's own output
never joins, nor a warm-up's), bounded by a response count and a size (the tree's nodes), the
oldest evicted first. A prompt never drafts from an earlier response to the same prompt: before a
run drafts, the memory forgets that prompt's responses (else a rerun, or the warm-up before a
measured run, would draft the very output the baseline gives: an oracle, not a draft).

The bounds agree: the response count is vLLM's 10,000 (`MAX_REQUESTS`), and the size bound
(``--suffix-memory-mb``, default `DEFAULT_MB`, at most `MAX_MB`) is that many of the bundled model's
answers: at depth 24 they make 14.4 tree nodes a token and 137 tokens an answer, at the measured
`BYTES_PER_NODE` (140) 10,000 of them take about 2,800 MB (counted as if no two shared a node: an
upper end). Longer answers meet the size bound first, shorter ones the count; either way the oldest
go first. The memory grows as responses join: the bound is a cap, nothing is reserved.

With a file (``--suffix-memory PATH``) the memory is kept on disk for its model and tokenizer:
loaded when the model is, rewritten atomically after each response joins (after the run's clock
stopped). The file keeps the tree itself (its arrays, `SuffixTree.to_parts`: 32 bytes a node), so
reading it back is a copy, whole-array checks and one dict, not a rebuild over every substring:
for the bundled model's corpus (2.0 million nodes, a 64.5 MB file) 1.5 s of CPU against 5.1 s to
rebuild (a loaded 2-core machine). A file of the first version (responses only) is read and
rebuilt. A file that is damaged, truncated, not a memory, over the bounds, or kept for another
model or tokenizer is refused in one line and left as it is: its digest, the arrays' ranges and
every children list are checked (never trusted). Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import weakref
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import msgspec

from decoders.core.errors import DecodeError
from decoders.methods.shared.suffix_memory_file import (  # noqa: F401 (the file's names, imported from here too)
    FIX,
    FLAG,
    FORMAT,
    MAX_FILE_BYTES,
    MAX_MB,
    VERSION,
    MemoryFile,
    TreeFile,
    check_bounds,
    check_kept,
    check_memory_file,
    decode,
    digest,
    lock_memory_file,
    mb_for_nodes,
    memory_fix,
    nodes_for_mb,
    read_memory_file,
    release_locks,
)
from decoders.methods.shared.suffix_tree import BYTES_PER_NODE, SuffixTree

if TYPE_CHECKING:
    from decoders.models.family import Family

DEFAULT_DEPTH = 24  # a memory's depth until a run asks for another (`--suffix-depth`'s default)
MAX_REQUESTS = 10_000  # responses kept (vLLM's default cache size)
DEFAULT_MB = 2_800  # the size bound in MB (`--suffix-memory-mb`): MAX_REQUESTS of the bundled model's answers
MAX_NODES = DEFAULT_MB * 1_000_000 // BYTES_PER_NODE  # the default size bound in tree nodes
MAX_RESPONSE_TOKENS = 1 << 20  # tokens of one response kept (the rest is cut)


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
        self.source: Path | None = None  # the file it was read from without being kept there (`read_memory`)
        self.save_error: str | None = None  # why the last write after a run failed (`save_quietly`)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def nodes(self) -> int:
        return self.tree.nodes

    def bound(self, max_requests: int | None = None, max_nodes: int | None = None) -> int:
        """Set the bounds (None: keep that one) and evict the oldest responses until the memory is
        within them; how many were evicted."""
        if max_requests is not None:
            self.max_requests = max_requests
        if max_nodes is not None:
            self.max_nodes = max_nodes
        return self._evict()

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
        self._evict()

    def _evict(self) -> int:
        gone = 0
        while len(self.entries) > 1 and (len(self.entries) > self.max_requests or self.tree.nodes > self.max_nodes):
            self._drop(next(iter(self.entries)))
            self.evicted += 1
            gone += 1
        return gone

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
        self._evict()

    # files ------------------------------------------------------------------------------------
    def dumps(self) -> bytes:
        arrays, free = self.tree.to_parts()
        kept = MemoryFile(FORMAT, VERSION, self.identity, self.model,
                          [(e.prompt, e.tokens) for e in self.entries.values()],
                          TreeFile(self.depth, self.tree.nodes, arrays, free))
        kept.digest = digest(kept)
        return msgspec.msgpack.encode(kept)

    def save(self, path: str | Path | None = None) -> None:
        from decoders.records.atomic import write_bytes

        target = path or self.path
        if target is not None:
            write_bytes(target, self.dumps(), "the suffix memory")

    def save_quietly(self) -> None:
        """`save`, a failure kept in ``save_error`` (a run's result must not be lost to a full
        disk: its caller says it after the run)."""
        try:
            self.save()
            self.save_error = None
        except DecodeError as err:
            self.save_error = str(err)

    def copy(self) -> SuffixMemory:
        """Another memory holding the same responses in a tree of its own (`SuffixTree.to_parts`:
        a copy of its arrays, no rebuild), kept nowhere: what is added to either leaves the other."""
        twin = SuffixMemory(self.depth, self.max_requests, self.max_nodes, self.identity, self.model)
        arrays, free = self.tree.to_parts()
        twin.tree = SuffixTree.from_parts(self.depth, self.tree.nodes, arrays, free)
        twin.entries = OrderedDict((i, Entry(e.prompt, list(e.tokens))) for i, e in self.entries.items())
        twin._next, twin.tokens, twin.source = self._next, self.tokens, self.source
        return twin

    def load(self, path: str | Path, vocab_size: int, kept: MemoryFile | None = None, flag: str = FLAG) -> None:
        """Fill from ``path`` (kept for this identity); DecodeError in one line, the file untouched
        and this memory unchanged, when it is not a memory for this model and tokenizer, or it
        holds more than this memory's bounds. ``kept``: the file as `check_memory_file` already
        read it (not read again). An empty file holds nothing: this memory stays as it is.
        ``flag``: the flag the file was given with, named in what to do."""
        from decoders.records.inputs import read_bytes

        fix = memory_fix(flag)
        if kept is None:
            data = read_bytes(path, "the suffix memory", MAX_FILE_BYTES, fix)
            if not data:  # a new memory (`check_memory_file`)
                self.path = Path(path)
                return
            kept = decode(data, path, flag)
        check_kept(kept, path, flag)
        if kept.identity != self.identity:
            raise DecodeError(f"the suffix memory {path} was built for another model or tokenizer "
                              f"({kept.model[:120]}), not {self.model[:120]}; {fix}")
        for i, (_, tokens) in enumerate(kept.responses):
            bad = next((t for t in tokens if not 0 <= t < vocab_size), None)
            if bad is not None:
                raise DecodeError(f"the suffix memory {path} is damaged: response {i} holds token id {bad}, "
                                  f"outside this tokenizer's {vocab_size} ids; {fix}")
        check_bounds(kept, path, self.max_requests, self.max_nodes, flag)
        fresh = SuffixMemory(self.depth, self.max_requests, self.max_nodes, self.identity, self.model)
        tree = kept.tree
        if tree is not None and tree.depth == self.depth:
            try:
                fresh.tree = SuffixTree.from_parts(tree.depth, tree.nodes, tree.arrays, tree.free)
            except ValueError as err:
                raise DecodeError(f"the suffix memory {path} is damaged: its tree does not hold together ({err}); "
                                  f"{fix}") from None
            for prompt, tokens in kept.responses:
                fresh.entries[fresh._next] = Entry(prompt, tokens)
                fresh._next += 1
                fresh.tokens += len(tokens)
        else:  # a file of the first version, or of another depth: built again from its responses
            for prompt, tokens in kept.responses:
                fresh.add(prompt, tokens)
            if fresh.evicted:
                raise DecodeError(f"the suffix memory {path} holds more than this memory's bounds "
                                  f"({self.max_requests} responses, {self.max_nodes:,} nodes at depth {self.depth}); "
                                  f"give a larger --suffix-memory-mb (at most {MAX_MB}) or {fix}")
        self.tree, self.entries, self._next, self.tokens = fresh.tree, fresh.entries, fresh._next, fresh.tokens
        self.evicted = 0
        self.path = Path(path)

    def figures(self) -> dict[str, Any]:
        return {"responses": len(self.entries), "tokens": self.tokens, "nodes": self.tree.nodes,
                "evicted": self.evicted}


# --- one memory per loaded model -----------------------------------------------------------------
_MEMORIES: dict[int, tuple[Callable[[], Any], SuffixMemory]] = {}


def identity(family: Family) -> tuple[str, str]:
    """(digest, words) naming the model and the tokenizer: a memory from another is refused."""
    display = [family.display(i) for i in range(family.vocab_size)]
    digest = hashlib.sha256("\x00".join(display).encode("utf-8", "replace")).hexdigest()[:16]
    words = f"{family.main_source}, {family.vocab_size} tokens, tokenizer {digest}"
    return hashlib.sha256(f"{family.main_source}|{family.vocab_size}|{digest}".encode()).hexdigest()[:24], words


def _owner(family: Family) -> Any:
    """What a memory belongs to: the main model's backend (a family made again around the same
    model, with another draft, keeps the memory), else the family itself."""
    return family.main if family.main is not None else family


def memory_for(family: Family, depth: int | None = None) -> SuffixMemory:
    """The memory of ``family``'s model (made empty the first time, at ``depth`` or the default
    24), at ``depth`` (None: as it is)."""
    owner = _owner(family)
    held = _MEMORIES.get(id(owner))
    if held is not None and held[0]() is owner:
        memory = held[1]
        if depth is not None:
            memory.with_depth(depth)
        return memory
    memory = SuffixMemory(depth or DEFAULT_DEPTH)
    ref: Callable[[], Any]
    try:  # the entry goes when its model does
        ref = weakref.ref(owner, _forgetter(id(owner)))
    except TypeError:  # an owner that cannot be referred to weakly: kept for the process's life
        ref = (lambda o: lambda: o)(owner)
    _MEMORIES[id(owner)] = (ref, memory)
    return memory


@contextmanager
def memory_in_use(family: Family, memory: SuffixMemory) -> Iterator[SuffixMemory]:
    """While inside, ``memory`` is ``family``'s model's memory (`memory_for`): the one its runs
    draft from and their responses join (`remember`, after a run's clocks stopped); the model's
    own memory is back after. ``bench --workload session`` gives each row that drafts from a
    memory one of its own this way, so that a row's memory holds its own answers only."""
    memory_for(family)  # the model's own memory, made where it was not yet: it is put back after
    key = id(_owner(family))
    held = _MEMORIES[key]
    _MEMORIES[key] = (held[0], memory)
    try:
        yield memory
    finally:
        _MEMORIES[key] = held


def drafts_from_memory(method: str, source: str) -> bool:
    """Whether a run of ``method`` with ``--suffix-source`` ``source`` drafts from the memory of
    earlier responses (suffix decoding from both trees), so that its speedup can change as the
    memory grows."""
    return method == "suffix" and source == "both"


def _forgetter(key: int) -> Callable[[Any], None]:
    return lambda _: _MEMORIES.pop(key, None) and None


def remember(family: Family, prompt_ids: Sequence[int], tokens: Sequence[int]) -> SuffixMemory:
    """A finished response of any method joins its model's memory (the session's earlier
    responses are what suffix decoding drafts from), and its file is rewritten when it has one;
    called after the run's clock stopped (`decoders.engine.Engine`). A failed write is kept in
    ``save_error``."""
    memory = memory_for(family)
    memory.add(prompt_key(prompt_ids), tokens)
    memory.save_quietly()
    return memory


def open_memory_file(family: Family, path: str, depth: int, mb: float | None = None,
                     flag: str = FLAG) -> SuffixMemory:
    """Keep ``family``'s memory in ``path``: load it when the file exists (refused in one line when
    it is not this model's memory), and write it there after each response joins, this process
    holding its lock (`lock_memory_file`). ``mb``: its size bound (`nodes_for_mb`; None: the default).
    ``flag``: the flag ``path`` was given with (`datastore build`: --out), named in what to do."""
    from decoders.records.atomic import check_destination

    if not Path(path).exists():
        check_destination(path, flag, "the suffix memory")
    lock_memory_file(path, flag)
    memory = memory_for(family, depth)
    if not memory.identity:
        memory.identity, memory.model = identity(family)
    memory.bound(max_nodes=nodes_for_mb(mb if mb is not None else DEFAULT_MB))
    if Path(path).exists():
        memory.load(path, family.vocab_size, flag=flag)
    memory.path = Path(path)
    return memory


def read_memory(family: Family, path: str, depth: int, mb: float | None = None,
                kept: MemoryFile | None = None) -> SuffixMemory:
    """The memory kept in ``path`` for ``family``'s model, read with `open_memory_file`'s checks
    (refused in one line when damaged, foreign or over the ``mb`` bound) but held apart: not the
    model's memory, and never written back (``bench --suffix-memory``: the bench measures, it does
    not write the user's memory). ``kept``: the file as `check_memory_file` already read it."""
    memory = SuffixMemory(depth, max_nodes=nodes_for_mb(mb if mb is not None else DEFAULT_MB))
    memory.identity, memory.model = identity(family)
    memory.load(path, family.vocab_size, kept)
    memory.path, memory.source = None, Path(path)
    return memory


def reset_memories() -> None:
    """Forget every model's memory and let go of their files (tests)."""
    _MEMORIES.clear()
    release_locks()
