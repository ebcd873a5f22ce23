"""Backends: a model plus the one key/value cache it runs against.

A backend knows nothing about prefixes or tokens; `decoders.backends.runner.KVRunner` decides what to
crop and what to run. Two implementations: `HFBackend` runs any transformers causal LM through
its own forward and `DynamicCache`; `decoders.backends.llama_fast.LlamaBackend` runs Llama-shaped models
(SmolLM2, Llama, Qwen2) with a preallocated cache and less per-layer overhead.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache

    from decoders.backends.features import FeatureTap


class Backend(Protocol):
    """A causal LM that owns one KV cache.

    ``forward(ids, keep, positions=None, mask=None)`` appends the 1-D LongTensor ``ids`` (on
    ``device``) after the ``cached_length`` positions already cached and returns float32
    logits ``[keep, vocab]`` of the last ``keep`` of them. ``positions`` (1-D long, one per new
    token) are the position ids RoPE sees, by default ``cached_length .. cached_length + n - 1``;
    the cache slots are always the next ``n`` whatever the positions. ``mask`` (bool ``[n, n]``)
    says which new tokens each new token attends to (True: query i may attend to new token j;
    the diagonal must be True); by default causal. Every new token attends to all cached
    positions. Tree verification passes depths as positions and the ancestor mask.

    ``crop(n)`` keeps only the first ``n`` cached positions. ``compact(start, rows)`` keeps,
    after the first ``start`` positions, only the entries at ``start + rows[i]`` (ascending,
    relative to ``start``), moved to ``start + i``; ``cached_length`` becomes
    ``start + len(rows)``. After a tree forward this keeps the cache of the accepted path.
    """

    device: torch.device
    dtype: torch.dtype
    vocab_size: int
    max_positions: int
    n_layers: int
    weight_bytes: int  # bytes of weights one forward reads (for the bandwidth floor)

    @property
    def cached_length(self) -> int: ...

    def forward(self, ids: torch.Tensor, keep: int, positions: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor: ...

    def crop(self, length: int) -> None: ...

    def compact(self, start: int, rows: Sequence[int] | torch.Tensor) -> None: ...

    def reset(self) -> None: ...

    def early_exit(self, layers: int) -> Backend:
        """A backend that runs only the first ``layers`` decoder layers, then the final norm and
        the LM head, sharing this backend's weights (no second copy) with a cache of its own."""
        ...


def twin_of(backend: Backend) -> Backend | None:
    """A second backend on ``backend``'s weights with a cache of its own, or None where the backend
    cannot make one (``twin()`` is optional: `decoders.backends.capabilities.Twinned`; a test's
    fake need not have it). Its outputs are the original's, forward for forward."""
    from decoders.backends.capabilities import Twinned

    return backend.twin() if isinstance(backend, Twinned) and callable(backend.twin) else None  # (a twin of None: none)


def count_weight_bytes(model) -> int:
    """Bytes of distinct parameters (tied embeddings counted once; offloaded ones, on the meta
    device with no storage, each counted)."""
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        key = p.data_ptr() or id(p)
        if key in seen:
            continue
        seen.add(key)
        total += p.numel() * p.element_size()
    return total


def input_device(model):
    """Where a model's input ids go: its embedding's device (the CPU when a device map offloaded
    the embedding to disk; accelerate's hooks move inputs where each layer runs)."""
    import torch

    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    weight = getattr(embeddings, "weight", None)
    device = weight.device if weight is not None else next(model.parameters()).device
    return torch.device("cpu") if device.type == "meta" else device


def checked_rows(rows: Sequence[int], available: int) -> list[int]:
    """``rows`` for ``compact`` as a list, checked: ascending, each in ``0 .. available - 1``."""
    rows = [int(r) for r in rows]
    if any(b <= a for a, b in zip(rows, rows[1:], strict=False)) or (rows and not 0 <= rows[0] <= rows[-1] < available):
        raise ValueError(f"rows must ascend within 0..{available - 1}, got {rows}")
    return rows


#: Attention implementations that apply a custom 4-D float mask as given (additively).
MASKABLE_ATTENTION = ("sdpa", "eager")


class HFBackend:
    """Any transformers causal LM, run through its own forward with a `DynamicCache`.

    Explicit ``positions`` go to the model as ``position_ids``. A ``mask`` goes in as a 4-D
    additive float ``attention_mask`` ``[1, 1, n, cached_length + n]``, which transformers'
    mask construction passes through untouched; that needs sdpa or eager attention and only
    full-attention layers, and `compact` needs plain `DynamicLayer` cache layers. Other models
    raise `NotImplementedError` naming the model type.
    """

    def __init__(self, model, max_positions: int | None = None):
        import torch

        self.model = model.eval()
        config = model.config
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        self.device = input_device(model)
        self.dtype = next(model.parameters()).dtype
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.max_positions = int(max_positions or getattr(text_config, "max_position_embeddings", 0) or 2048)
        self.n_layers = int(getattr(text_config, "num_hidden_layers", 0) or 0)
        self.weight_bytes = count_weight_bytes(model)
        self.tap: FeatureTap | None = None  # the hidden states a draft head reads, when one is attached
        self.reset()
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
        self._cache: DynamicCache | None = None
        self._length = 0
        self._floor = 0  # the shortest length `crop` can return to (sliding-window caches)
        self._sliding = False
        if self.tap is not None:
            self.tap.reset()

    def crop(self, length: int) -> None:
        if length >= self._length:
            return
        if length == 0 or self._cache is None:
            self.reset()
            return
        if length < self._floor:
            # a sliding-window layer keeps only the states since its last crop (and its window
            # before them): it cannot go back further, so start over; the runner sees the
            # shorter cache and runs the prefix again
            self.reset()
            return
        # transformers 5.x: crop takes a negative count of positions to drop
        self._cache.crop(length - self._length)
        self._length = length
        if self.tap is not None:
            self.tap.crop(length)
        if self._sliding:
            self._floor = length

    def compact(self, start: int, rows) -> None:
        """Keep cache positions ``start + rows[i]`` at ``start + i``; drop the rest after ``start``."""
        torch = self._torch
        start = int(start)
        if not 0 <= start <= self._length:
            raise ValueError(f"start must be in 0..{self._length}, got {start}")
        if isinstance(rows, torch.Tensor):
            rows = rows.reshape(-1).to(device=self.device, dtype=torch.long)
            count = int(rows.numel())
        else:
            rows = checked_rows(rows, self._length - start)
            count = len(rows)
        if start + count == 0 or self._cache is None:
            self.reset()
            return
        layers = self._plain_layers("compact")
        index = torch.as_tensor(rows, dtype=torch.long, device=self.device) + start
        with torch.inference_mode():  # the cache tensors are inference tensors
            for layer in layers:
                for name in ("keys", "values"):
                    tensor = getattr(layer, name)
                    if count:
                        tensor[..., start : start + count, :] = tensor[..., index, :]
                    setattr(layer, name, tensor[..., : start + count, :])
            if self.tap is not None:
                self.tap.compact(start, index - start)
        self._length = start + count

    def forward(self, ids, keep: int, positions=None, mask=None):
        from transformers import DynamicCache

        torch = self._torch
        n = int(ids.shape[-1])
        if self._cache is None:
            self._cache = DynamicCache(config=self.model.config)
            # sliding-window layers drop what falls out of the window at once and then cannot be
            # cropped back; recording keeps the states since the last crop, so that drafts can
            # be rolled back (each crop trims the layer to its window again)
            self._sliding = any(getattr(layer, "is_sliding", False) for layer in getattr(self._cache, "layers", ()))
            if self._sliding:
                self._cache.activate_past_recording()
        start = self._length
        slots = torch.arange(start, start + n, device=self.device)
        if positions is None:
            positions = slots
        else:
            positions = positions.reshape(-1).to(device=self.device, dtype=torch.long)
            if positions.numel() != n:
                raise ValueError(f"positions must hold {n} entries, got {positions.numel()}")
        kwargs: dict[str, Any] = {self._cache_kwarg: self._cache}
        if self._pass_cache_position:  # cache slots (where transformers writes), not RoPE positions
            kwargs["cache_position"] = slots
        if mask is not None:
            kwargs["attention_mask"] = self._attention_mask(mask, start, n)
        tap = self.tap
        if tap is not None:  # a draft head reads the target's hidden states (decoders.backends.features)
            kwargs["output_hidden_states"] = True
        with torch.inference_mode():
            out = self.model(input_ids=ids.view(1, n), position_ids=positions.view(1, n), use_cache=True,
                             logits_to_keep=keep, **kwargs)
        self._length = start + n
        if tap is not None:
            states = out.hidden_states  # [0]: the embeddings; [i]: the input of layer i; [-1]: after the final norm
            tap.write(start, ids, [states[-1][0]] if tap.layers is None else [states[i][0] for i in tap.layers])
        return out.logits[0, -keep:].float()

    def _attention_mask(self, mask, start: int, n: int):
        """The ``[n, n]`` bool mask among new tokens as transformers' 4-D additive float mask."""
        torch = self._torch
        if tuple(mask.shape) != (n, n) or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor of shape ({n}, {n}), got {mask.dtype} {tuple(mask.shape)}")
        config = self.model.config
        implementation = getattr(config, "_attn_implementation", None) or "eager"
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        layer_types = set(getattr(text_config, "layer_types", None) or ())
        reason = None
        if implementation not in MASKABLE_ATTENTION:
            reason = f"attention implementation {implementation!r} is not one of {MASKABLE_ATTENTION}"
        elif layer_types - {"full_attention"}:
            reason = f"layer types {sorted(layer_types - {'full_attention'})}"
        elif getattr(text_config, "use_sliding_window", False) or getattr(text_config, "sliding_window", None):
            reason = "sliding-window attention"
        if reason is None and self._cache is not None:
            self._plain_layers("a custom attention mask")
        if reason is not None:
            raise NotImplementedError(f"HFBackend cannot apply a tree mask to model type "
                                      f"{getattr(text_config, 'model_type', '?')!r}: {reason}")
        full = torch.zeros((1, 1, n, start + n), dtype=self.dtype, device=self.device)
        full[0, 0, :, start:].masked_fill_(~mask.to(self.device), torch.finfo(self.dtype).min)
        return full

    def _plain_layers(self, what: str) -> list:
        """The cache's layers, when every one is a plain `DynamicLayer` (keys/values tensors)."""
        from transformers.cache_utils import DynamicLayer

        layers = list(getattr(self._cache, "layers", None) or ())
        odd = sorted({type(layer).__name__ for layer in layers if type(layer) is not DynamicLayer})
        if odd or not layers:
            kind = getattr(self.model.config, "model_type", "?")
            raise NotImplementedError(f"HFBackend cannot do {what} for model type {kind!r}: its cache layers are "
                                      f"{odd or 'missing'}, not plain DynamicLayer")
        return layers

    def twin(self) -> HFBackend:
        """The same model with a cache of its own (no second copy of the weights): the baseline
        that steps in alternation with a method run (`decoders.engine.Engine`)."""
        return HFBackend(self.model, self.max_positions)

    def early_exit(self, layers: int) -> HFBackend:
        if is_dispatched(self.model):
            from decoders.core.errors import DecodeError

            raise DecodeError("An early-exit draft cannot run on a model spread by a device map (accelerate's hooks "
                              "run the whole model); drop the device map or draft with a helper model.")
        return HFBackend(truncated_model(self.model, layers), self.max_positions)


def is_dispatched(model) -> bool:
    """Whether accelerate spread ``model`` over devices (its modules then carry hooks)."""
    return bool(getattr(model, "hf_device_map", None)) or any(hasattr(m, "_hf_hook") for m in model.modules())


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
