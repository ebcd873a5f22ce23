"""B sequences on llama.cpp in one ``llama_decode`` (`LlamaCppBatched`): the interface of the torch
backend's `decoders.backends.batched.BatchedLM` (`decoders.backends.capabilities.BatchedModel`),
so that `decoders.methods.batch.chain.decode_batch` and the batch bench drive either.

Row ``b`` is llama.cpp sequence ``b`` of a context made with ``n_seq_max`` = the rows it holds and
one KV stream per sequence (``kv_unified`` off): each row's cells are its own, in its own
position order, and attention reads only them, as a batch-1 run's does. Each token of a batch
carries its row's sequence id and its row's own next position; a step gives every row the same
``k`` tokens (a row with fewer padded at its tail), because llama.cpp splits a batch over several
streams into micro-batches of equal tokens per sequence and consecutive sequence ids, and a ragged
batch would run as several. `commit` removes each row's rejected and padded positions
(``llama_memory_seq_rm``), so there are no holes and `compact` has nothing to do. When rows leave
(`keep_rows`), the staying rows' sequences are moved down to 0..B'-1 (``llama_memory_seq_cp``
across streams copies the stream's cells) so the ids stay consecutive.

llama_cpp is imported when a batch is made, never at module import.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Sequence

from decoders.core.errors import DecodeError

if TYPE_CHECKING:
    import torch

    from decoders.backends.llamacpp import LlamaModel

#: The token id written in a padded tail (its position is removed by `commit`; never read).
PAD_ID = 0
#: Cells llama.cpp pads a stream to (the flash-attention kernels' padding).
CELL_PAD = 256


def max_rows(model: LlamaModel) -> int:
    """The most sequences one llama.cpp context holds (``n_seq_max``'s bound)."""
    return int(model.lib.llama_max_parallel_sequences())


def kv_bytes_per_cell(model: LlamaModel) -> int:
    """Bytes of keys and values one cached position of one sequence holds (float16, every layer)."""
    lib, m = model.lib, model.model
    heads = max(1, int(lib.llama_model_n_head(m)))
    kv_heads = int(lib.llama_model_n_head_kv(m)) or heads
    head_dim = int(lib.llama_model_n_embd(m)) // heads
    return 2 * model.n_layers * kv_heads * head_dim * 2


def positions_per_row(prompt_tokens: int, max_new: int, width: int) -> int:
    """Cells one row needs: its prompt, its tokens and one step's ``width`` beyond them."""
    return prompt_tokens + max_new + width


def check_batch(model: LlamaModel, batches: Sequence[int], positions: int, width: int,
                available: int | None, share: float = 0.5, draft: LlamaModel | None = None) -> None:
    """DecodeError in one line for a batch size llama.cpp cannot hold: above ``n_seq_max``'s bound,
    rows longer than the model's context, or a cache above ``share`` of the available memory (with
    ``draft``, a GGUF helper drafting at batch B, its cache and logits too)."""
    from decoders.core.host_memory import format_bytes

    bound = max_rows(model)
    context = int(model.context_trained or 2048)
    for size in batches:
        if size > bound:
            raise DecodeError(f"batch size {size} is above the {bound} sequences one llama.cpp context holds "
                              f"(n_seq_max); give --batch sizes up to {bound}")
    if positions > context:
        raise DecodeError(f"each sequence needs {positions} positions (prompt, --max-new-tokens and a step's "
                          f"width), beyond the model's context of {context}; lower --max-new-tokens or --num-pred")
    if available is None:
        return
    models = [model] if draft is None else [model, draft]
    what = "cache and logits" if draft is None else "caches and logits (the target's and the helper's)"
    for size in batches:
        need = size * sum(_padded(positions) * kv_bytes_per_cell(m) + 2 * width * m.vocab_size * 4 for m in models)
        if need > share * available:
            raise DecodeError(f"batch size {size} needs about {format_bytes(need)} for its llama.cpp {what}, more "
                              f"than half of the {format_bytes(available)} available; give smaller --batch sizes or "
                              "lower --max-new-tokens")


def _padded(positions: int) -> int:
    return -(-positions // CELL_PAD) * CELL_PAD


class LlamaCppBatched:
    """Up to ``capacity`` sequences of up to ``positions`` cells each decoded together on one
    llama.cpp context (see the module's note). A context is reused: `start` clears it."""

    def __init__(self, model: LlamaModel, capacity: int, positions: int):
        import torch

        self._torch = torch
        self.model = model
        self.lib = lib = model.lib
        bound = max_rows(model)
        if not 1 <= capacity <= bound:
            raise DecodeError(f"batch size {capacity} is above the {bound} sequences one llama.cpp context holds "
                              f"(n_seq_max); give --batch sizes up to {bound}")
        self.capacity = int(capacity)
        self.vocab_size = model.vocab_size
        per_row = _padded(max(1, int(positions)))
        params = lib.llama_context_default_params()
        params.n_ctx = per_row * self.capacity
        params.n_batch = per_row * self.capacity
        params.n_ubatch = 512
        params.n_seq_max = self.capacity
        params.n_outputs_max = 0
        params.n_outputs_max_per_seq = 0
        params.kv_unified = False  # a stream per sequence: each row attends over its own cells only
        params.no_perf = True
        params.swa_full = True
        threads = torch.get_num_threads()
        params.n_threads = params.n_threads_batch = threads
        self._threads = threads
        ctx = lib.llama_init_from_model(model.model, params)
        if not ctx:
            raise DecodeError(f"llama.cpp cannot make a context of {self.capacity} sequences of {per_row} positions "
                              f"for {model.path.name}; give smaller --batch sizes or lower --max-new-tokens")
        self.ctx = ctx
        self.memory = lib.llama_get_memory(ctx)
        #: positions each row may fill: its stream's cells (``llama_n_ctx_seq``, where llama.cpp has it)
        self.positions = per_row
        self._batch_size = int(params.n_batch)
        self._batch = lib.llama_batch_init(self._batch_size, 0, 1)
        self.next_pos: list[int] = []  # each row's next position (its cached token count)
        self._last_k = 0

    @property
    def rows(self) -> int:
        return len(self.next_pos)

    @property
    def slots(self) -> int:
        """The longest row's cells (a step's uncommitted tokens included)."""
        return max(self.next_pos, default=0) + self._last_k

    @property
    def holes(self) -> int:
        return 0  # `commit` frees every rejected cell

    def compact(self) -> None:
        """Nothing to squeeze: rejected cells are freed at `commit`."""

    def start(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        """Prefill every prompt, row ``b`` in sequence ``b``; logits ``[B, vocab]`` after each one."""
        if not prompts or any(not p for p in prompts):
            raise ValueError("every row needs a non-empty prompt")
        if len(prompts) > self.capacity:
            raise DecodeError(f"batch size {len(prompts)} is above the {self.capacity} sequences this llama.cpp "
                              "context was made for; make it with a larger capacity")
        self.lib.llama_memory_clear(self.memory, True)
        self.next_pos = [0] * len(prompts)
        self._last_k = 0
        self._check_room([len(p) for p in prompts])
        tokens = [(b, j, int(t), j == len(p) - 1) for b, p in enumerate(prompts) for j, t in enumerate(p)]
        logits = self._decode(tokens)
        self.next_pos = [len(p) for p in prompts]
        return logits

    def step(self, new: Sequence[Sequence[int]]) -> torch.Tensor:
        """Append each row's new tokens (``new[b]``, at least one; rows padded to the longest) at
        its own next positions; logits ``[B, k, vocab]`` (a row's padded tail is garbage). Then
        `commit` says how many of them each row keeps."""
        if len(new) != self.rows or any(not row for row in new):
            raise ValueError(f"step needs 1+ new tokens for each of the {self.rows} rows")
        k = max(len(row) for row in new)
        self._check_room([p + k for p in self.next_pos])
        tokens = [(b, self.next_pos[b] + j, int(row[j]) if j < len(row) else PAD_ID, j < len(row))
                  for b, row in enumerate(new) for j in range(k)]
        logits = self._decode(tokens)  # the real tokens' only: a padded tail costs no output row
        self._last_k = k
        if all(len(row) == k for row in new):
            return logits.view(self.rows, k, self.vocab_size)
        out = logits.new_zeros((self.rows, k, self.vocab_size))
        at = 0
        for b, row in enumerate(new):
            out[b, : len(row)] = logits[at: at + len(row)]
            at += len(row)
        return out

    def commit(self, kept: Sequence[int]) -> None:
        """Each row keeps the first ``kept[b]`` tokens of the last step (the rest are removed)."""
        k = self._last_k
        if len(kept) != self.rows or any(not 0 <= n <= k for n in kept):
            raise ValueError(f"kept must give 0..{k} for each of the {self.rows} rows, got {list(kept)}")
        for b, n in enumerate(kept):
            self.next_pos[b] += n
            if n < k:
                self.lib.llama_memory_seq_rm(self.memory, b, self.next_pos[b], -1)
        self._last_k = 0

    def rollback(self, drop: Sequence[int]) -> None:
        """Each row forgets its last ``drop[b]`` kept tokens (a draft model's rejected drafts, kept
        over several steps): their cells are removed, the row's next position goes back."""
        if self._last_k or len(drop) != self.rows or any(not 0 <= n <= self.next_pos[b] for b, n in enumerate(drop)):
            raise ValueError(f"rollback takes 0..each row's tokens for each of the {self.rows} rows after a commit, "
                             f"got {list(drop)}")
        for b, n in enumerate(drop):
            if n:
                self.next_pos[b] -= n
                self.lib.llama_memory_seq_rm(self.memory, b, self.next_pos[b], -1)

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Only ``rows`` (ascending indices) stay in the batch: each moves to the sequence of its new index."""
        rows = [int(r) for r in rows]
        if rows == list(range(self.rows)):
            return
        lib, mem = self.lib, self.memory
        for b, r in enumerate(rows):  # r >= b, and a later source is above every earlier target
            if r != b:
                lib.llama_memory_seq_cp(mem, r, b, -1, -1)  # across streams: the cells are copied
        for s in range(len(rows), self.rows):
            lib.llama_memory_seq_rm(mem, s, -1, -1)
        self.next_pos = [self.next_pos[r] for r in rows]

    def crop(self, slots: int) -> None:
        """Every row drops its positions from ``slots`` on (the surface's rollback after a timed step)."""
        for b in range(self.rows):
            self.lib.llama_memory_seq_rm(self.memory, b, slots, -1)
            self.next_pos[b] = min(self.next_pos[b], slots)
        self._last_k = 0

    def _check_room(self, ends: Sequence[int]) -> None:
        longest = max(ends, default=0)
        if longest > self.positions:
            raise DecodeError(f"a sequence reached {longest} positions, beyond the {self.positions} each sequence of "
                              "this llama.cpp batch holds; lower max_new_tokens or the draft length")

    def _decode(self, tokens: list[tuple[int, int, int, bool]]) -> torch.Tensor:
        """Decode (row, position, token, wants logits) in one batch, ordered by row; the logits
        of the tokens that want them, in that order."""
        lib, batch, torch = self.lib, self._batch, self._torch
        threads = torch.get_num_threads()
        if threads != self._threads:
            lib.llama_set_n_threads(self.ctx, threads, threads)
            self._threads = threads
        n = len(tokens)
        if n > self._batch_size:
            raise DecodeError(f"a batch of {n} tokens is more than the {self._batch_size} this llama.cpp context "
                              "decodes at once; give smaller --batch sizes or shorter prompts")
        outputs = 0
        for i, (row, pos, token, out) in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = row
            batch.logits[i] = out
            outputs += out
        batch.n_tokens = n
        code = lib.llama_decode(self.ctx, batch)
        if code != 0:
            raise DecodeError(f"llama.cpp could not decode a batch of {n} tokens over {self.rows} sequences "
                              f"(llama_decode returned {code}); give smaller --batch sizes")
        out = lib.llama_get_logits(self.ctx)
        rows = torch.frombuffer((ctypes.c_float * (outputs * self.vocab_size)).from_address(
            ctypes.addressof(out.contents)), dtype=torch.float32).clone()
        return rows.view(outputs, self.vocab_size)

    def __del__(self):
        lib: Any = self.__dict__.get("lib")
        if lib is None:
            return
        try:
            if self.__dict__.get("_batch") is not None:
                lib.llama_batch_free(self._batch)
                self._batch = None
            if self.__dict__.get("ctx"):
                lib.llama_free(self.ctx)
                self.ctx = None
        except Exception:  # interpreter shutdown
            pass
