"""A bigram "model" behind the engine's Backend interface: the logits at each position depend only
on the token there, read from a fixed table. A forward costs microseconds, and the exact
distribution of every emitted position is known in closed form (a Markov chain), so sampling
can be checked end to end through a method with many thousands of runs in seconds."""

from __future__ import annotations

import torch

from decoders.models.family import Family
from tests.support.tiny import tiny_tokenizer


class BigramBackend:
    """``table[v]`` are the logits after token v; the cache only remembers its length."""

    def __init__(self, table: torch.Tensor, max_positions: int = 256):
        self.table = table.float()
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.vocab_size = int(table.shape[1])
        self.max_positions = max_positions
        self.n_layers = 1
        self.weight_bytes = table.numel() * 4
        self._length = 0

    @property
    def cached_length(self) -> int:
        return self._length

    def forward(self, ids: torch.Tensor, keep: int, positions=None, mask=None) -> torch.Tensor:
        self._length += int(ids.numel())
        return self.table[ids.reshape(-1)[-keep:]]

    def crop(self, length: int) -> None:
        self._length = min(self._length, length)

    def reset(self) -> None:
        self._length = 0

    def compact(self, start: int, rows) -> None:  # a tree verify keeps its accepted path
        self._length = int(start) + len(rows)

    def early_exit(self, layers: int) -> BigramBackend:
        return BigramBackend(self.table, self.max_positions)


def bigram_family(target: torch.Tensor, helper: torch.Tensor) -> Family:
    vocab = int(target.shape[1])
    return Family(label="bigram", main=BigramBackend(target), helper=BigramBackend(helper),
                  tokenizer=tiny_tokenizer(vocab), stop_ids=frozenset(), device=torch.device("cpu"),
                  dtype=torch.float32, main_source="bigram", helper_source="bigram-helper", context_length=256,
                  vocab_size=vocab)


def marginals(table: torch.Tensor, start: int, positions: int, temperature: float) -> torch.Tensor:
    """Exact distribution of each of the next ``positions`` tokens after token ``start`` when
    sampling from softmax(table / temperature): rows of the Markov chain's powers."""
    step = torch.softmax(table.double() / temperature, dim=-1)
    dist = step[start]
    out = [dist]
    for _ in range(positions - 1):
        dist = dist @ step
        out.append(dist)
    return torch.stack(out)
