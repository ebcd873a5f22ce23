"""The llama.cpp backend: a GGUF file run by llama.cpp itself (llama-cpp-python's low-level API).

The engine's `Backend` protocol over ``llama_decode``: every forward is one batch whose tokens
carry their own positions and sequence ids, with logits kept for the last ``keep`` rows; `crop`
removes positions from the KV cache (``llama_memory_seq_rm``); a tree's ancestor mask is expressed
through sequence ids the way llama.cpp's own tree speculation does: one sequence per leaf, each
node in the sequences of the leaves below it, the prefix copied into every one of them
(``llama_memory_seq_cp``, which shares cells rather than copying them), so that a node sees a
cell iff they share a sequence and the cell's position is not after its own. `compact` keeps the
accepted root-to-node path: its cells are given back to sequence 0 and every other sequence is
dropped (``llama_memory_seq_keep``).

The weights stay as the file stores them (98 MB for the bundled Q4_1 file, against 538 MB of
float32 in the torch backend), read by llama.cpp's own quantized kernels. What llama.cpp cannot
do here is said in one line: a mask that is not a tree, a cache rearranged in any other way, an
early exit, the hidden states a trained head reads.

llama_cpp is imported when a backend is made, never at module import.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Sequence

from decoders.backends.llamacpp_model import LlamaModel
from decoders.core.errors import DecodeError

if TYPE_CHECKING:
    import torch

#: The most positions a context is made with (its KV cache is allocated up front).
MAX_CONTEXT = 8192
#: Cells of rejected tree nodes held before the cache is decoded again (each costs attention work).
MAX_PARKED = 256


class LlamaCppBackend:
    """A llama.cpp context on a `LlamaModel`: one KV cache, the engine's `Backend` protocol.

    Logits come back as float32 ``[keep, vocab]`` torch tensors on the CPU (copied out of
    llama.cpp's buffer, which the next decode overwrites). Threads follow torch's
    ``get_num_threads()`` (``--threads``) at every forward.
    """

    dtype: torch.dtype
    device: torch.device
    tap = None  # no hidden states: a trained head needs the torch backend

    def __init__(self, model: LlamaModel, max_positions: int | None = None):
        import torch

        self._torch = torch
        self.lib = lib = model.lib
        self.model = model
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.vocab_size = model.vocab_size
        self.n_layers = model.n_layers
        self.weight_bytes = model.weight_bytes
        trained = model.context_trained or 2048
        self.max_positions = int(min(max_positions or trained, trained, MAX_CONTEXT))
        # llama.cpp asserts n_outputs_max (n_batch, here the context) >= n_seq_max at context creation
        self.n_seq = int(min(lib.llama_max_parallel_sequences(), 256, self.max_positions))
        params = lib.llama_context_default_params()
        params.n_ctx = self.max_positions
        params.n_batch = self.max_positions
        params.n_ubatch = min(512, self.max_positions)
        params.n_seq_max = self.n_seq
        params.kv_unified = True  # one cache for every sequence: a tree's cells are shared, not copied
        params.no_perf = True
        params.swa_full = True
        threads = torch.get_num_threads()
        params.n_threads = params.n_threads_batch = threads
        self._threads = threads
        ctx = lib.llama_init_from_model(model.model, params)
        if not ctx:
            raise DecodeError(f"llama.cpp cannot make a context of {self.max_positions} positions for "
                              f"{model.path.name}; free some memory or lower the context")
        self.ctx = ctx
        self.memory = lib.llama_get_memory(ctx)
        self._batch_size = self.max_positions
        self._batch = lib.llama_batch_init(self._batch_size, 0, self.n_seq)
        self._length = 0
        self._ids: list[int] = []  # the token in each cached slot (a repack decodes them again)
        self._parked = 0  # cells of rejected tree nodes kept occupied (see `compact`)
        self._park = self.n_seq - 1  # the sequence those cells belong to; no token is decoded in it
        self._pending: tuple | None = None  # (start, leaves, sequences of each node, position of each node)
        self.reset()

    # -- the protocol ----------------------------------------------------------------------------------

    @property
    def cached_length(self) -> int:
        return self._length

    def twin(self) -> LlamaCppBackend:
        """A second context on the same loaded weights, with a cache of its own."""
        return LlamaCppBackend(self.model, self.max_positions)

    def reset(self) -> None:
        self.lib.llama_memory_clear(self.memory, True)
        self._length = 0
        self._ids = []
        self._parked = 0
        self._pending = None

    def forward(self, ids: torch.Tensor, keep: int, positions: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """ids [n] long; positions [n] long or None; mask [n, n] bool or None -> logits [keep, vocab] float32."""
        torch = self._torch
        tokens = [int(t) for t in ids.reshape(-1).tolist()]
        n = len(tokens)
        if n == 0:
            raise ValueError("forward needs at least one token")
        if not 1 <= keep <= n:
            raise ValueError(f"keep must be in 1..{n}, got {keep}")
        start = self._length
        if start + n > self.max_positions:
            raise DecodeError(f"the sequence reached {start + n} positions, beyond the llama.cpp context of "
                              f"{self.max_positions}; lower max_new_tokens or shorten the prompt")
        self._settle()
        if self._parked and (self._parked > MAX_PARKED or start + n + self._parked > self.max_positions):
            self._repack()
        pos = list(range(start, start + n)) if positions is None else [int(p) for p in positions.reshape(-1).tolist()]
        if len(pos) != n:
            raise ValueError(f"{len(pos)} positions for {n} tokens")
        if mask is None:
            if pos != list(range(start, start + n)):
                raise NotImplementedError("the llama.cpp backend runs shifted positions only with a tree mask")
            seqs = [[0]] * n
            tree = None
        else:
            seqs, tree = self._sequences(mask, pos, start)
        self._decode(tokens, pos, seqs, keep)
        self._length = start + n
        self._ids.extend(tokens)
        if tree is not None:
            self._pending = tree
        out = self.lib.llama_get_logits(self.ctx)
        rows = torch.frombuffer((ctypes.c_float * (keep * self.vocab_size)).from_address(
            ctypes.addressof(out.contents)), dtype=torch.float32).clone()
        return rows.view(keep, self.vocab_size)

    def crop(self, length: int) -> None:
        length = max(int(length), 0)
        if length >= self._length:
            return
        if self._pending is not None:
            start = self._pending[0]
            if length > start:  # the first nodes of a tree are kept only as a path
                self.compact(start, list(range(length - start)))
                return
            self._drop_tree()
        if length == 0:
            self.reset()
            return
        self.lib.llama_memory_seq_rm(self.memory, 0, length, -1)
        self._length = length
        del self._ids[length:]

    def compact(self, start: int, rows: Sequence[int] | torch.Tensor) -> None:
        """Keep cache positions ``start + rows[i]`` at ``start + i``: after a tree forward the rows
        of a root-to-node path (their positions are already ``start + i``); on a plain cache only
        a prefix of what follows ``start`` (anything else would move keys under RoPE)."""
        from decoders.backends.hf import checked_rows

        torch = self._torch
        listed = rows.reshape(-1).tolist() if isinstance(rows, torch.Tensor) else list(rows)
        start = int(start)
        if not 0 <= start <= self._length:
            raise ValueError(f"start must be in 0..{self._length}, got {start}")
        rows = checked_rows(listed, self._length - start)
        pending = self._pending
        if pending is None or pending[0] != start:
            if pending is not None:
                self._settle()
            if rows != list(range(len(rows))):
                raise NotImplementedError("the llama.cpp backend keeps only a prefix of a plain cache, or a path of "
                                          "the tree it just ran")
            self.crop(start + len(rows))
            return
        _, leaves, node_seqs, node_pos = pending
        if not rows:
            self._drop_tree()
            return
        shared = set(node_seqs[rows[0]]).intersection(*(node_seqs[r] for r in rows))
        if not shared:
            raise ValueError(f"rows {rows} are not a path of the tree just run")
        leaf = min(shared)
        lib, mem = self.lib, self.memory
        end = start + len(rows)
        # A freed cell before a kept one would take the next token out of position order, and
        # llama.cpp's attention then gives other logits (measured: total variation 0.03 on the
        # bundled model): the rejected nodes before the last kept one stay occupied, in a sequence
        # no token reads, until a repack; those after it are freed.
        kept = set(rows)
        for j in range(rows[-1]):
            if j not in kept:
                p = node_pos[j]
                lib.llama_memory_seq_cp(mem, node_seqs[j][0], self._park, p, p + 1)
                self._parked += 1
        lib.llama_memory_seq_rm(mem, leaf, end, -1)  # the path's cells below the last kept node
        lib.llama_memory_seq_cp(mem, leaf, 0, start, end)  # the kept path joins sequence 0 ...
        for s in range(1, leaves + 1):  # ... and the leaves' sequences go
            lib.llama_memory_seq_rm(mem, s, -1, -1)
        self._ids[start:] = [self._ids[start + r] for r in rows]
        self._pending = None
        self._length = end

    def early_exit(self, layers: int):
        raise DecodeError("An early-exit draft needs the torch backend (llama.cpp runs the whole model); use "
                          "--backend torch, or draft with a GGUF helper model")

    # -- internals ---------------------------------------------------------------------------------------

    def _sequences(self, mask: torch.Tensor, pos: list[int], start: int):
        """The sequence ids of each new token that give ``mask`` under llama.cpp's rule (a token
        sees a cell iff they share a sequence and the cell's position is not after its own).

        The new tokens are a causal run (sequence 0) followed by a tree: one sequence per leaf,
        each node in the sequences of the leaves that attend to it. NotImplementedError where the
        mask cannot be said that way."""
        m = mask.to("cpu", dtype=self._torch.bool)
        n = len(pos)
        rows = m.tolist()
        first = 0  # the causal run: token i sees 0..i, at positions start + i
        while first < n and pos[first] == start + first and all(rows[first][: first + 1]) \
                and not any(rows[first][first + 1:]):
            first += 1
        # the run ends where a later token stops seeing all of it (a first-level node alone looks causal)
        while first and any(not all(rows[i][:first]) for i in range(first, n)):
            first -= 1
        # tree nodes: each sees the whole causal run and its own ancestors
        nodes = range(first, n)
        if not nodes:
            return [[0]] * n, None
        attended = {j for i in nodes for j in nodes if j != i and rows[i][j]}
        leaves = [i for i in nodes if i not in attended]
        if len(leaves) > self.n_seq - 2:
            raise NotImplementedError(f"a tree of {len(leaves)} leaves is more than the {self.n_seq - 2} sequences "
                                      "this llama.cpp context holds for one")
        node_seqs: list[list[int]] = [[] for _ in range(n)]
        for s, leaf in enumerate(leaves, start=1):
            for j in nodes:
                if rows[leaf][j]:
                    node_seqs[j].append(s)
        for i in nodes:  # the rule must give the mask back exactly
            for j in nodes:
                implied = pos[j] <= pos[i] and bool(set(node_seqs[i]) & set(node_seqs[j]))
                if implied != bool(rows[i][j]):
                    raise NotImplementedError("this attention mask is not a tree llama.cpp's sequences can express")
        for i in range(first):
            node_seqs[i] = [0]
        # the causal run and the cached prefix are seen by every leaf's sequence
        tree_start = start + first
        self._prefix_into(len(leaves))
        seqs = [node_seqs[i] if i >= first else [0, *range(1, len(leaves) + 1)] for i in range(n)]
        return seqs, (tree_start, len(leaves), node_seqs[first:], pos[first:])

    def _prefix_into(self, count: int) -> None:
        """Sequences 1..count see the cached prefix (cells shared with sequence 0)."""
        for s in range(1, count + 1):
            self.lib.llama_memory_seq_cp(self.memory, 0, s, 0, self._length)

    def _drop_tree(self) -> None:
        """Free every node of the tree just run (they are the last cells: nothing is left out of order)."""
        assert self._pending is not None
        start, leaves = self._pending[0], self._pending[1]
        for s in range(1, leaves + 1):
            self.lib.llama_memory_seq_rm(self.memory, s, -1, -1)
        self._length = start
        del self._ids[start:]
        self._pending = None

    def _repack(self) -> None:
        """Decode the cached tokens again into an empty cache (the parked cells gone): once more
        than MAX_PARKED cells are parked, or when they would leave no room."""
        ids = self._ids[: self._length]
        self.reset()
        for at in range(0, len(ids), self._batch_size):
            chunk = ids[at: at + self._batch_size]
            self._decode(chunk, list(range(at, at + len(chunk))), [[0]] * len(chunk), 1)
        self._length = len(ids)
        self._ids = list(ids)

    def _settle(self) -> None:
        """A tree left unresolved is dropped (a forward after a tree keeps none of it)."""
        if self._pending is not None:
            self._drop_tree()

    def _decode(self, tokens: list[int], pos: list[int], seqs: list[list[int]], keep: int) -> None:
        lib, batch = self.lib, self._batch
        n = len(tokens)
        threads = self._torch.get_num_threads()
        if threads != self._threads:
            lib.llama_set_n_threads(self.ctx, threads, threads)
            self._threads = threads
        for i, (token, p, ids) in enumerate(zip(tokens, pos, seqs, strict=True)):
            batch.token[i] = token
            batch.pos[i] = p
            batch.n_seq_id[i] = len(ids)
            for k, s in enumerate(ids):
                batch.seq_id[i][k] = s
            batch.logits[i] = i >= n - keep
        batch.n_tokens = n
        code = lib.llama_decode(self.ctx, batch)
        if code != 0:
            raise DecodeError(f"llama.cpp could not decode a batch of {n} tokens (llama_decode returned {code}); "
                              "lower max_new_tokens or the draft sizes")

    def __del__(self):
        lib = getattr(self, "lib", None)
        if lib is None:
            return
        try:
            if getattr(self, "_batch", None) is not None:
                lib.llama_batch_free(self._batch)
                self._batch = None
            if getattr(self, "ctx", None):
                lib.llama_free(self.ctx)
                self.ctx = None
        except Exception:  # interpreter shutdown
            pass
