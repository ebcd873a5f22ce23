"""Backends: a model plus the one key/value cache it runs against.

A backend knows nothing about prefixes or tokens; `decoders.runner.KVRunner` decides what to
crop and what to run. Two implementations: `HFBackend` runs any transformers causal LM through
its own forward and `DynamicCache`; `decoders.llama_fast.LlamaBackend` runs Llama-shaped models
(SmolLM2, Llama, Qwen2) with a preallocated cache and less per-layer overhead.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch


class Backend(Protocol):
    """A causal LM that owns one KV cache.

    ``forward(ids, keep)`` appends the 1-D LongTensor ``ids`` (on ``device``) after the
    ``cached_length`` positions already cached and returns float32 logits ``[keep, vocab]``
    of the last ``keep`` of them. ``crop(n)`` keeps only the first ``n`` cached positions.
    """

    device: torch.device
    dtype: torch.dtype
    vocab_size: int
    max_positions: int
    n_layers: int
    weight_bytes: int  # bytes of weights one forward reads (for the bandwidth floor)

    @property
    def cached_length(self) -> int: ...

    def forward(self, ids: torch.Tensor, keep: int) -> torch.Tensor: ...

    def crop(self, length: int) -> None: ...

    def reset(self) -> None: ...

    def early_exit(self, layers: int) -> Backend:
        """A backend that runs only the first ``layers`` decoder layers, then the final norm and
        the LM head, sharing this backend's weights (no second copy) with a cache of its own."""
        ...


def count_weight_bytes(model) -> int:
    """Bytes of distinct parameters (tied embeddings counted once)."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        total += p.numel() * p.element_size()
    return total


class HFBackend:
    """Any transformers causal LM, run through its own forward with a `DynamicCache`."""

    def __init__(self, model, max_positions: int | None = None):
        import torch

        self.model = model.eval()
        config = model.config
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.max_positions = int(max_positions or getattr(text_config, "max_position_embeddings", 0) or 2048)
        self.n_layers = int(getattr(text_config, "num_hidden_layers", 0) or 0)
        self.weight_bytes = count_weight_bytes(model)
        self._cache = None
        self._length = 0
        self._torch = torch
        # transformers 5.x renamed `past_key_values` to `cache` model by model
        import inspect

        accepted = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in accepted else "past_key_values"
        self._pass_cache_position = "cache_position" in accepted

    @property
    def cached_length(self) -> int:
        return self._length

    def reset(self) -> None:
        self._cache = None
        self._length = 0

    def crop(self, length: int) -> None:
        if length >= self._length:
            return
        if length == 0 or self._cache is None:
            self.reset()
            return
        # transformers 5.x: crop takes a negative count of positions to drop
        self._cache.crop(length - self._length)
        self._length = length

    def forward(self, ids, keep: int):
        from transformers import DynamicCache

        torch = self._torch
        n = int(ids.shape[-1])
        if self._cache is None:
            self._cache = DynamicCache(config=self.model.config)
        start = self._length
        positions = torch.arange(start, start + n, device=self.device)
        kwargs = {self._cache_kwarg: self._cache}
        if self._pass_cache_position:
            kwargs["cache_position"] = positions
        with torch.inference_mode():
            out = self.model(input_ids=ids.view(1, n), position_ids=positions.view(1, n), use_cache=True,
                             logits_to_keep=keep, **kwargs)
        self._length = start + n
        return out.logits[0, -keep:].float()

    def early_exit(self, layers: int) -> HFBackend:
        return HFBackend(truncated_model(self.model, layers), self.max_positions)


def truncated_model(model, layers: int):
    """A shallow view of ``model`` that runs its first ``layers`` decoder layers only.

    The parameters are the same tensors as the full model's; only the module containers and the
    config are copied.
    """
    import torch.nn as nn

    base_name = getattr(model, "base_model_prefix", "model")
    base = getattr(model, base_name)
    if not hasattr(base, "layers"):
        raise TypeError(f"{type(model).__name__} keeps no `layers` list; early exit needs a decoder stack")
    view = copy.copy(model)
    view._modules = dict(model._modules)
    base_view = copy.copy(base)
    base_view._modules = dict(base._modules)
    base_view._modules["layers"] = nn.ModuleList(list(base.layers)[:layers])
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = layers
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types)[:layers]
    base_view.config = config
    view.config = config
    view._modules[base_name] = base_view
    return view
