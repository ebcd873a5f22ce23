"""What some backends can do beyond `decoders.backends.hf.Backend`, one small Protocol each.

A backend need not have any of these (a test's fake has none); the code that uses one asks with
``isinstance(backend, Capability)`` instead of probing for a name with ``getattr``, so that the
checker sees the contract and a rename fails loudly. Each is ``runtime_checkable``: the check
looks for the names only (their signatures are for the type checker).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from decoders.backends.features import FeatureTap
    from decoders.backends.hf import Backend


@runtime_checkable
class Twinned(Protocol):
    """Makes a second backend on the same weights with a cache of its own (the interleaved baseline)."""

    def twin(self) -> Backend: ...


@runtime_checkable
class AdoptsCache(Protocol):
    """Takes cache positions from another backend (a self-draft reads its target's keys and values)."""

    def adopt_reason(self, source: Backend) -> str | None: ...

    def adopt_cache(self, source: Backend, start: int, end: int) -> None: ...


@runtime_checkable
class Tapped(Protocol):
    """Hands a trained draft head the hidden states of its forwards while ``tap`` is set."""

    tap: FeatureTap | None


@runtime_checkable
class CappedDraft(Protocol):
    """Drafts at most ``max_draft`` tokens a step (Medusa: no head beyond its last)."""

    max_draft: int


@runtime_checkable
class TreeDrafter(Protocol):
    """Drafts a tree of candidates in one forward per level (EAGLE-2's expansion)."""

    def tree_rows(self, ids: torch.Tensor, parents: list[int], positions: list[int],
                  ancestors: list[list[int]], prefix: int) -> torch.Tensor: ...


@runtime_checkable
class NamedSource(Protocol):
    """A built draft that names where it came from (a trained head: its folder), as a run records it."""

    source: str


@runtime_checkable
class OwnBytes(Protocol):
    """A self-draft that reads some of its target's weights: the bytes it holds of its own."""

    own_bytes: int


@runtime_checkable
class ChunkedCache(Protocol):
    """A static cache that grows in chunks (`decoders.backends.kv_cache.KVCache`): room is made
    ahead of a timed run with ``reserve``."""

    max_positions: int

    def reserve(self, needed: int) -> None: ...


@runtime_checkable
class HasChunkedCache(Protocol):
    """A backend whose cache is a `ChunkedCache` (check ``cache`` with that Protocol too)."""

    cache: object


class BatchedModel(Protocol):
    """B sequences decoded together, each at its own positions, finished ones leaving
    (`decoders.backends.batched.BatchedLM` on torch, `decoders.backends.llamacpp_batched.LlamaCppBatched`
    on llama.cpp): what `decoders.methods.batch.chain.decode_batch` and the batch bench drive, and
    what a model draft drafts in (`decoders.methods.batch.model_draft.ModelDraft`: ``next_pos``,
    `rollback`)."""

    #: each row's next position (its cached token count)
    next_pos: list[int]

    @property
    def rows(self) -> int: ...

    @property
    def slots(self) -> int: ...

    @property
    def holes(self) -> int: ...

    def start(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor: ...

    def step(self, new: Sequence[Sequence[int]]) -> torch.Tensor: ...

    def commit(self, kept: Sequence[int]) -> None: ...

    def rollback(self, drop: Sequence[int]) -> None: ...

    def keep_rows(self, rows: Sequence[int]) -> None: ...

    def compact(self) -> None: ...

    def crop(self, slots: int) -> None: ...
