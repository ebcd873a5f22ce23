"""Suffix decoding at batch B (issues 38, 39): each row drafts as the batch-1 method
(`decoders.methods.suffix`) does, from a suffix tree over its own prompt and output, extended by
each token it emits, and from the memory of earlier responses, which a batch run only reads.

A row never drafts from its own output before it produced it: its own tree holds only what it
has emitted, the memory is not added to during the run, and `memory_tree` leaves out any earlier
response to a prompt of the run (else a rerun would draft the very output it is compared with:
an oracle, not a draft; the batch-1 method forgets them the same way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from decoders.core.errors import DecodeError
from decoders.methods.shared.suffix_draft import best_draft, best_path
from decoders.methods.shared.suffix_tree import SuffixTree
from decoders.methods.suffix import SUFFIX_DEPTH, SUFFIX_FACTOR, SUFFIX_MIN_PROB

if TYPE_CHECKING:
    from decoders.methods.shared.suffix_memory import SuffixMemory


@dataclass(frozen=True)
class SuffixShape:
    """Suffix decoding's draft shape at batch B (the batch-1 method's ``--suffix-depth``,
    ``--suffix-factor``, ``--suffix-min-prob``; its ``--suffix-max`` is the row's k) and the
    memory of earlier responses it drafts from beside each row's own tree (None: its own alone).
    The memory is only read during a batch run: no row's output joins it before the run ends."""

    depth: int = SUFFIX_DEPTH.default
    factor: float = SUFFIX_FACTOR.default
    min_prob: float = SUFFIX_MIN_PROB.default
    memory: SuffixTree | None = None


class SuffixDraft:
    """Suffix decoding's path draft for one row, the batch-1 method's own choice (`best_draft`
    over `best_path`): the row's suffix tree over its prompt and output, extended by each token it
    emits (O(depth) a token, never rebuilt), and the memory's tree, only followed (read, never
    counted into). At most min(``k``, the row's budget) tokens, each draft capped at factor x the
    matched suffix's length and cut where the product of branch frequencies falls below the
    minimum probability."""

    def __init__(self, seq: list[int], k: int, shape: SuffixShape):
        if shape.memory is not None and shape.memory.depth != shape.depth:
            raise DecodeError(f"the suffix memory was built at depth {shape.memory.depth}, the rows draft at depth "
                              f"{shape.depth}; give --suffix-depth {shape.memory.depth}")
        self.k, self.shape = k, shape
        self.tree = SuffixTree(shape.depth)
        self.active = self.tree.extend(self.tree.start(), seq)
        self.memory_active = shape.memory.matches(seq) if shape.memory is not None else []
        self.seen = len(seq)

    def propose(self, seq: list[int], budget: int) -> list[int]:
        shape = self.shape
        found = best_draft(best_path, self.tree, self.active, shape.memory, self.memory_active, min(self.k, budget),
                           shape.factor, shape.min_prob, shape.depth)
        return list(found.tokens) if found is not None else []

    def extend(self, seq: list[int]) -> None:
        memory = self.shape.memory
        for t in seq[self.seen:]:
            self.active = self.tree.append(self.active, t)
            if memory is not None:
                self.memory_active = memory.follow(self.memory_active, t)
        self.seen = len(seq)


def memory_tree(memory: SuffixMemory, prompts: Sequence[Sequence[int]], depth: int) -> SuffixTree:
    """The tree of ``memory`` that rows of ``prompts`` draft from at ``depth``: the memory's own
    (only read) where it is at that depth and holds no response to any of ``prompts``; otherwise
    a copy with those responses left out, at that depth (the memory itself stays as it is)."""
    from decoders.methods.shared.suffix_memory import prompt_key

    keys = {prompt_key(p) for p in prompts}
    if memory.depth == depth and not any(e.prompt in keys for e in memory.entries.values()):
        return memory.tree
    twin = memory.copy()
    for key in keys:
        twin.forget(key)
    twin.with_depth(depth)
    return twin.tree
