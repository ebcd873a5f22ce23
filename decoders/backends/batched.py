"""B sequences on one transformers causal LM in one forward: a shared `DynamicCache` whose slots
are columns common to every row, each row's own positions, and a mask of the slots each row may
read (`BatchedLM`).

Ragged lengths without moving any cache entry: the prompts go in left-padded (the pad slots are
never read); each step appends the same number of slots ``k`` to every row, a row with fewer new
tokens padding its tail; after the step each row keeps the slots it accepted and the rest become
holes that no later query reads (`commit`). Each row's RoPE positions count its own tokens only,
so a row sees exactly the keys and positions it would see alone: its greedy output is its batch-1
output up to the batched kernels' rounding (a near tie may break the other way). `compact`
squeezes the holes out when they pile up; `keep_rows` lets finished rows leave the batch.

The mask goes in as transformers' 4-D additive float mask ``[B, 1, k, slots]``, which it passes
through untouched; that needs sdpa or eager attention on full-attention layers (as `HFBackend`'s
tree mask does).

A trained draft head reads the target's hidden states (`decoders.backends.features`): after
`want_features`, every forward also leaves ``features`` ``[B, k, width]`` (float32, on the
device): each row's states of the positions it just ran, the ones its head drafts from. They come
out of the same forward (no second one, no host transfer).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from decoders.backends.hf import MASKABLE_ATTENTION, input_device

#: The token id written in pad slots (never read: masked for every query).
PAD_ID = 0


def kv_bytes_per_slot(model) -> int:
    """Bytes of keys and values one cache slot of one row holds, over all layers."""
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(getattr(text, "num_attention_heads", 1) or 1)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text, "head_dim", None) or int(text.hidden_size) // heads)
    layers = int(getattr(text, "num_hidden_layers", 1) or 1)
    dtype = next(model.parameters()).dtype
    return 2 * layers * kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


def batch_unsupported(model) -> str | None:
    """Why `BatchedLM` cannot run ``model`` (None: it can)."""
    config = model.config
    implementation = getattr(config, "_attn_implementation", None) or "eager"
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if implementation not in MASKABLE_ATTENTION:
        return f"its attention implementation {implementation!r} takes no per-row mask (needs sdpa or eager)"
    if set(getattr(text, "layer_types", None) or ()) - {"full_attention"} or getattr(text, "sliding_window", None):
        return "it has sliding-window layers"
    return None


class BatchedLM:
    """A transformers causal LM decoding several sequences at once (see the module's note)."""

    def __init__(self, model, max_slots: int | None = None):
        self.model = model.eval()
        self.device = input_device(model)
        self.dtype = next(model.parameters()).dtype
        config = model.config
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        self.max_slots = int(max_slots or getattr(text, "max_position_embeddings", 0) or 2048)
        self.cache: Any = None
        self.valid = torch.zeros((0, 0), dtype=torch.bool)  # [B, slots]: which slots each row reads
        self.next_pos: list[int] = []  # each row's next RoPE position (its token count)
        self._last_k = 0
        #: the hidden states a draft head reads: None (off), () (after the final norm) or the
        #: layers whose input (the residual stream entering them) it reads, concatenated
        self.feature_layers: tuple[int, ...] | None = None
        self.features: torch.Tensor | None = None  # [B, k, width] of the last forward (see the note)
        import inspect

        accepted = inspect.signature(model.forward).parameters  # transformers 5.x: `cache`, model by model
        self._cache_kwarg = "cache" if "cache" in accepted else "past_key_values"
        self._pass_cache_position = "cache_position" in accepted

    def want_features(self, layers: Sequence[int] | None) -> None:
        """Keep each forward's hidden states in ``features``: the final norm's output (``layers``
        None, as EAGLE-1/2 and Medusa read) or the residual streams entering ``layers`` (EAGLE-3)."""
        self.feature_layers = () if layers is None else tuple(int(i) for i in layers)

    @property
    def rows(self) -> int:
        return len(self.next_pos)

    @property
    def slots(self) -> int:
        return int(self.valid.shape[1])

    def start(self, prompts: Sequence[Sequence[int]]) -> torch.Tensor:
        """Prefill every prompt (left-padded to the longest); logits ``[B, vocab]`` after each one."""
        from transformers import DynamicCache

        if not prompts or any(not p for p in prompts):
            raise ValueError("every row needs a non-empty prompt")
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), PAD_ID, dtype=torch.long)
        valid = torch.zeros((len(prompts), width), dtype=torch.bool)
        positions = torch.zeros((len(prompts), width), dtype=torch.long)
        for b, prompt in enumerate(prompts):
            pad = width - len(prompt)
            ids[b, pad:] = torch.tensor(list(prompt), dtype=torch.long)
            valid[b, pad:] = True
            positions[b, pad:] = torch.arange(len(prompt))
        self.cache = DynamicCache(config=self.model.config)
        self.valid = torch.zeros((len(prompts), 0), dtype=torch.bool)
        self.next_pos = [0] * len(prompts)
        logits = self._forward(ids, positions, valid)
        self.next_pos = [len(p) for p in prompts]
        self._last_k = 0  # the prompt is kept whole
        return logits[:, -1]

    def step(self, new: Sequence[Sequence[int]]) -> torch.Tensor:
        """Append each row's new tokens (``new[b]``, at least one; rows padded to the longest) at
        its own next positions; logits ``[B, k, vocab]`` (a row's padded tail is garbage). Then
        `commit` says how many of them each row keeps."""
        if len(new) != self.rows or any(not row for row in new):
            raise ValueError(f"step needs 1+ new tokens for each of the {self.rows} rows")
        k = max(len(row) for row in new)
        ids = torch.full((self.rows, k), PAD_ID, dtype=torch.long)
        real = torch.zeros((self.rows, k), dtype=torch.bool)
        for b, row in enumerate(new):
            ids[b, : len(row)] = torch.tensor(list(row), dtype=torch.long)
            real[b, : len(row)] = True
        positions = torch.tensor(self.next_pos, dtype=torch.long).view(-1, 1) + torch.arange(k).view(1, -1)
        logits = self._forward(ids, positions, real)
        self._last_k = k
        return logits

    def commit(self, kept: Sequence[int]) -> None:
        """Each row keeps the first ``kept[b]`` slots of the last step (the rest become holes)."""
        k = self._last_k
        if len(kept) != self.rows or any(not 0 <= n <= k for n in kept):
            raise ValueError(f"kept must give 0..{k} for each of the {self.rows} rows, got {list(kept)}")
        start = self.slots - k
        for b, n in enumerate(kept):
            self.valid[b, start + n:] = False
            self.next_pos[b] += n
        self._last_k = 0

    def rollback(self, drop: Sequence[int]) -> None:
        """Each row forgets its last ``drop[b]`` kept tokens (a draft model's rejected drafts, kept
        over several steps): their slots become holes, the row's next position goes back."""
        if self._last_k or len(drop) != self.rows or any(not 0 <= n <= self.next_pos[b] for b, n in enumerate(drop)):
            raise ValueError(f"rollback takes 0..each row's tokens for each of the {self.rows} rows after a commit, "
                             f"got {list(drop)}")
        for b, n in enumerate(drop):
            if n:
                kept = self.valid[b].nonzero().view(-1)
                self.valid[b, kept[-n:]] = False
                self.next_pos[b] -= n

    def keep_rows(self, rows: Sequence[int]) -> None:
        """Only ``rows`` (ascending indices) stay in the batch: the others are done."""
        rows = [int(r) for r in rows]
        if rows == list(range(self.rows)):
            return
        index = torch.tensor(rows, dtype=torch.long)
        if rows:
            for layer in self.cache.layers:
                layer.keys = layer.keys.index_select(0, index.to(layer.keys.device))
                layer.values = layer.values.index_select(0, index.to(layer.values.device))
        self.valid = self.valid.index_select(0, index)
        self.next_pos = [self.next_pos[r] for r in rows]
        if self.features is not None:
            self.features = self.features.index_select(0, index.to(self.features.device))

    @property
    def holes(self) -> int:
        """Slots a row does not read, summed over rows (pads and rejected drafts)."""
        return int((~self.valid).sum())

    def compact(self) -> None:
        """Squeeze the holes out: each row's read slots moved to the right end, left-padded to the
        longest row (positions stay: they live in the keys already)."""
        if not self.rows or self._last_k:
            return
        counts = self.valid.sum(1)
        width = int(counts.max())
        if width == self.slots:
            return
        # for each row, the source slot of each target slot: pads point at slot 0 (masked anyway)
        gather = torch.zeros((self.rows, width), dtype=torch.long)
        valid = torch.zeros((self.rows, width), dtype=torch.bool)
        for b in range(self.rows):
            kept = self.valid[b].nonzero().view(-1)
            gather[b, width - kept.numel():] = kept
            valid[b, width - kept.numel():] = True
        with torch.inference_mode():
            for layer in self.cache.layers:
                for name in ("keys", "values"):
                    tensor = getattr(layer, name)  # [B, heads, slots, dim]
                    index = gather.to(tensor.device).view(self.rows, 1, width, 1).expand(
                        -1, tensor.shape[1], -1, tensor.shape[3])
                    setattr(layer, name, tensor.gather(2, index).contiguous())
        self.valid = valid

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        rows, k = ids.shape
        old = self.slots
        if old + k > self.max_slots:
            self.compact()
            old = self.slots
        # query j of row b reads the row's valid old slots and its real new slots up to j; a pad
        # reads itself too (so that no query is all masked), and no real token reads a pad
        causal = torch.ones((k, k), dtype=torch.bool).tril_()
        new = (causal.view(1, k, k) & real.view(rows, 1, k)) | torch.eye(k, dtype=torch.bool).view(1, k, k)
        allowed = torch.cat([self.valid.view(rows, 1, old).expand(rows, k, old), new], dim=2)
        mask = torch.zeros((rows, 1, k, old + k), dtype=self.dtype)
        mask.masked_fill_(~allowed.view(rows, 1, k, old + k), torch.finfo(self.dtype).min)
        kwargs: dict[str, Any] = {self._cache_kwarg: self.cache}
        if self._pass_cache_position:  # cache slots (where transformers writes), not RoPE positions
            kwargs["cache_position"] = torch.arange(old, old + k, device=self.device)
        layers = self.feature_layers
        if layers is not None:  # a draft head reads the hidden states (decoders.backends.features)
            kwargs["output_hidden_states"] = True
        with torch.inference_mode():
            out = self.model(input_ids=ids.to(self.device), position_ids=positions.to(self.device),
                             attention_mask=mask.to(self.device), use_cache=True, **kwargs)
            if layers is not None:
                states = out.hidden_states  # [0]: the embeddings; [i]: the input of layer i; [-1]: after the final norm
                picked = [states[i] for i in layers] if layers else [states[-1]]
                self.features = torch.cat(picked, dim=-1).float()
        self.valid = torch.cat([self.valid, real], dim=1)
        return out.logits.float()

    def crop(self, slots: int) -> None:
        """Drop every slot from ``slots`` on (the verify-cost surface's rollback after a timed step)."""
        if slots < self.slots:
            self.cache.crop(slots - self.slots)  # transformers 5.x: a negative count of slots to drop
            self.valid = self.valid[:, :slots]
            self._last_k = 0
