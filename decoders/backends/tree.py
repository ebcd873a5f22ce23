"""A token tree: candidate continuations that share prefixes, verified in one forward.

Nodes are numbered in topological order (a parent before its children); parent ``-1`` means the
node follows the prefix directly. A node's depth is the number of its ancestors, so its position
in the sequence is ``len(prefix) + depth``. `decoders.backends.runner.KVRunner.run_tree` runs a tree and
`KVRunner.keep_path` keeps the cache of one root-to-node path.

torch is imported only by `TokenTree.ancestor_mask`: the rest serves code that runs without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence


@dataclass(frozen=True)
class TokenTree:
    """Node ``i`` holds token ``tokens[i]`` and hangs under node ``parents[i]`` (-1: the root)."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    depth: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        tokens = tuple(int(t) for t in self.tokens)
        parents = tuple(int(p) for p in self.parents)
        if len(tokens) != len(parents):
            raise ValueError(f"{len(tokens)} tokens but {len(parents)} parents")
        depth: list[int] = []
        for i, parent in enumerate(parents):
            if not -1 <= parent < i:
                raise ValueError(f"node {i}: parent {parent} must be -1 or an earlier node")
            depth.append(0 if parent < 0 else depth[parent] + 1)
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "depth", tuple(depth))

    @classmethod
    def from_paths(cls, paths: Sequence[Sequence[int]]) -> TokenTree:
        """The trie of token sequences ``paths`` (shared prefixes merged), nodes in first-seen order."""
        tokens: list[int] = []
        parents: list[int] = []
        children: dict[tuple[int, int], int] = {}
        for path in paths:
            node = -1
            for token in path:
                key = (node, int(token))
                if key not in children:
                    children[key] = len(tokens)
                    tokens.append(int(token))
                    parents.append(node)
                node = children[key]
        return cls(tuple(tokens), tuple(parents))

    def __len__(self) -> int:
        return len(self.tokens)

    def path(self, node: int) -> list[int]:
        """Node indices from the root's child down to ``node`` (inclusive)."""
        if not 0 <= node < len(self.tokens):
            raise IndexError(f"node {node} is not in a tree of {len(self.tokens)} nodes")
        nodes = []
        while node >= 0:
            nodes.append(node)
            node = self.parents[node]
        return nodes[::-1]

    def children(self, node: int) -> list[int]:
        """The nodes directly under ``node`` (-1: under the root)."""
        return [i for i, parent in enumerate(self.parents) if parent == node]

    def is_path(self, nodes: Sequence[int]) -> bool:
        """Whether ``nodes`` run from a child of the root down, each the parent of the next."""
        return all(0 <= n < len(self.tokens) for n in nodes) and all(
            self.parents[n] == (nodes[k - 1] if k else -1) for k, n in enumerate(nodes))

    def ancestor_mask(self, device=None):
        """Bool ``[n, n]``: ``mask[i, j]`` is True when node ``j`` is node ``i`` or one of its ancestors."""
        import torch

        n = len(self.tokens)
        mask = torch.eye(n, dtype=torch.bool)
        for i, parent in enumerate(self.parents):
            if parent >= 0:
                mask[i] |= mask[parent]
        return mask if device is None else mask.to(device)
