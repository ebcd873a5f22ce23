"""transformers' side of the benchmark: the same model, prompt and token budget through
`generate()`, so that every figure of ours has a reference measured in the same run.

Three counterparts, all greedy (``do_sample=False``) with the engine's stop tokens:

* ``ar``   - plain ``generate()``;
* ``pld``  - ``generate(prompt_lookup_num_tokens=k, max_matching_ngram_size=n)``;
* ``spec`` - assisted generation, ``assistant_model=`` for a helper model or
  ``assistant_early_exit=L`` for self-drafting, with ``num_assistant_tokens=gamma`` on a constant
  schedule and the confidence threshold off, i.e. the same algorithm as our speculative decoder
  rather than transformers' adaptive default.

Target forwards are counted with a forward pre-hook so that transformers' tau (tokens per target
forward) is measured exactly as ours is; during early-exit drafting the model's
``num_hidden_layers`` is lowered, which tells draft forwards from target forwards.

Only the benchmark uses this module; the engine never imports it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Iterator, Sequence

from decoders.bench.common import BASELINE
from decoders.core.errors import DecodeError

if TYPE_CHECKING:
    from decoders.core.params import DecodeParams
    from decoders.models.family import Family


@dataclass
class HFRun:
    """One transformers decode: the tokens it produced and what they cost."""

    method: str  # ar | pld | spec (our name for the counterpart)
    label: str
    ids: list[int]  # new tokens only (prompt excluded)
    wall_ms: float  # the whole generate() call, prefill included (as our runs' wall time)
    target_forwards: int
    draft_forwards: int
    finish: str  # eos | length

    @property
    def ms_per_token(self) -> float:
        return self.wall_ms / max(len(self.ids), 1)

    @property
    def tau(self) -> float | None:
        return len(self.ids) / self.target_forwards if self.target_forwards else None


def transformers_model(obj) -> Any | None:
    """The transformers model behind a Family or a Backend, or None.

    `HFBackend` keeps it as ``.model``; a fast backend may keep it as ``.hf_model``; a Family
    may expose it directly. The benchmark needs it because transformers' own ``generate()`` is
    the reference.
    """
    for holder in (obj, getattr(obj, "main", None)):
        if holder is None:
            continue
        for name in ("hf_model", "model"):
            model = getattr(holder, name, None)
            if model is not None and hasattr(model, "generate"):
                return model
    return None


def _base_model(model):
    return getattr(model, getattr(model, "base_model_prefix", "model"), model)


class ForwardCounter:
    """Counts calls of a model's forward, split into full-depth (target) and early-exit (draft)."""

    def __init__(self, model):
        self.model = model
        self.full_layers = int(getattr(_base_model(model).config, "num_hidden_layers", 0) or 0)
        self.target = 0
        self.draft = 0
        self._handle = None

    def _count(self, module, args, kwargs):
        layers = getattr(_base_model(self.model).config, "num_hidden_layers", self.full_layers)
        if layers < self.full_layers:
            self.draft += 1
        else:
            self.target += 1

    def __enter__(self) -> ForwardCounter:
        self._handle = self.model.register_forward_pre_hook(self._count, with_kwargs=True)
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()


@contextlib.contextmanager
def assistant_settings(model, gamma: int) -> Iterator[None]:
    """Draft exactly ``gamma`` tokens per iteration (constant schedule, no confidence stop).

    transformers reads these from the *assistant's* generation config and may write the
    heuristic schedule's state back into it, so they are set for the call and restored after.
    """
    config = model.generation_config
    names = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")
    saved = {name: getattr(config, name, None) for name in names}
    config.num_assistant_tokens = gamma
    config.num_assistant_tokens_schedule = "constant"
    config.assistant_confidence_threshold = 0.0  # falsy: no early stop of the draft
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(config, name, value)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' per-call advice (pad token, generation flags) during timed runs."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


class HFReference:
    """Runs transformers' ``generate()`` variants on one model with the engine's stop tokens.

    ``helper_model`` (a separate draft model sharing the tokenizer) or ``early_exit_layer``
    (self-draft with the first L layers) decide what assisted generation uses; with neither,
    ``spec`` is unavailable, as it is in the engine.
    """

    def __init__(self, model, stop_ids: Collection[int], pad_id: int | None = None,
                 helper_model=None, early_exit_layer: int | None = None):
        import torch

        if model is None:
            raise DecodeError("the model family does not expose its transformers model, so the benchmark cannot run "
                              "transformers' generate() beside the engine")
        self.model = model.eval()
        self.stop_ids = sorted({int(t) for t in stop_ids})
        if not self.stop_ids:
            raise DecodeError("the model family has no stop tokens; the benchmark needs the engine's stop ids")
        self.pad_id = int(pad_id) if pad_id is not None else self.stop_ids[0]
        self.helper_model = None if helper_model is None else helper_model.eval()
        self.early_exit_layer = early_exit_layer
        self.device = next(model.parameters()).device
        self._torch = torch

    @property
    def has_assistant(self) -> bool:
        return self.helper_model is not None or self.early_exit_layer is not None

    def available(self, method: str) -> bool:
        return method in (BASELINE, "pld") or (method == "spec" and self.has_assistant)

    def _config(self, max_new_tokens: int, **extra):
        from transformers import GenerationConfig

        # a fresh config: the checkpoint's own defaults (sampling flags, penalties) must not leak in
        return GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=max_new_tokens, min_new_tokens=0,
                                eos_token_id=self.stop_ids, pad_token_id=self.pad_id, use_cache=True, **extra)

    def _generate(self, method: str, label: str, prompt_ids: Sequence[int], max_new_tokens: int,
                  counted: Sequence, **kwargs) -> HFRun:
        torch = self._torch
        input_ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=self.device)
        mask = torch.ones_like(input_ids)
        counters = [ForwardCounter(m) for m in counted]
        with quiet_transformers(), torch.inference_mode(), contextlib.ExitStack() as stack:
            for counter in counters:
                stack.enter_context(counter)
            t0 = time.perf_counter()
            out = self.model.generate(input_ids=input_ids, attention_mask=mask, **kwargs)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            wall = time.perf_counter() - t0
        new = out[0, input_ids.shape[1]:].tolist()
        finish = "eos" if new and new[-1] in self.stop_ids else "length"
        target = counters[0].target
        draft = counters[0].draft + sum(c.target + c.draft for c in counters[1:])
        return HFRun(method, label, new, round(1000 * wall, 3), target, draft, finish)

    def greedy(self, prompt_ids: Sequence[int], max_new_tokens: int) -> HFRun:
        """Plain greedy ``generate()``: transformers' autoregressive baseline."""
        return self._generate(BASELINE, "transformers generate() greedy", prompt_ids, max_new_tokens, [self.model],
                              generation_config=self._config(max_new_tokens))

    def prompt_lookup(self, prompt_ids: Sequence[int], max_new_tokens: int, num_pred: int,
                      ngram_max: int) -> HFRun:
        """``generate(prompt_lookup_num_tokens=k)`` with the same k and longest n-gram as ours."""
        config = self._config(max_new_tokens, prompt_lookup_num_tokens=num_pred, max_matching_ngram_size=ngram_max)
        return self._generate("pld", f"transformers prompt lookup (k={num_pred}, n<={ngram_max})", prompt_ids,
                              max_new_tokens, [self.model], generation_config=config)

    def assisted(self, prompt_ids: Sequence[int], max_new_tokens: int, gamma: int) -> HFRun:
        """Assisted generation with ``gamma`` drafts per iteration (helper model or early exit)."""
        if self.helper_model is not None:
            with assistant_settings(self.helper_model, gamma):
                return self._generate("spec", f"transformers assisted generation (helper, γ={gamma})", prompt_ids,
                                      max_new_tokens, [self.model, self.helper_model],
                                      generation_config=self._config(max_new_tokens),
                                      assistant_model=self.helper_model)
        if self.early_exit_layer is not None:
            layer = self.early_exit_layer
            with assistant_settings(self.model, gamma):
                return self._generate("spec", f"transformers assisted generation (early exit @ {layer}, γ={gamma})",
                                      prompt_ids, max_new_tokens, [self.model],
                                      generation_config=self._config(max_new_tokens, assistant_early_exit=layer))
        raise DecodeError("assisted generation needs a helper model or an early-exit layer; "
                          "give --helper SRC or --self-draft-layer L")

    def run(self, method: str, prompt_ids: Sequence[int], params: DecodeParams) -> HFRun | None:
        """transformers' counterpart of our ``method`` with ``params``' budget, draft length and
        n-gram size, or None where it has none (Jacobi)."""
        if method == BASELINE:
            return self.greedy(prompt_ids, params.max_new_tokens)
        if method == "pld":
            return self.prompt_lookup(prompt_ids, params.max_new_tokens, params.num_pred, params.ngram_max)
        if method == "spec" and self.has_assistant:
            return self.assisted(prompt_ids, params.max_new_tokens, params.gamma)
        return None

    def counterpart(self, method: str, params: DecodeParams) -> str | None:
        """The ``generate()`` call that :meth:`run` makes for ``method``, as the report shows it."""
        if not self.available(method):
            return None
        if method == BASELINE:
            return "generate(do_sample=False)"
        if method == "pld":
            return f"generate(prompt_lookup_num_tokens={params.num_pred}, max_matching_ngram_size={params.ngram_max})"
        how = (f"assistant_early_exit={self.early_exit_layer}" if self.helper_model is None
               else "assistant_model=helper")
        return (f"generate({how}, num_assistant_tokens={params.gamma}, "
                "num_assistant_tokens_schedule='constant', assistant_confidence_threshold=0)")


def reference_for(family: Family) -> HFReference:
    """transformers on the family's own model objects (same weights, same stop tokens).

    A helper with no transformers model of its own is an early-exit view of the main model, so
    transformers' counterpart is ``assistant_early_exit`` at the helper's depth.
    """
    model = getattr(family, "main_model", None)
    if model is None:
        model = transformers_model(family.main)
    helper_model = getattr(family, "helper_model", None)
    early_exit = None
    if family.helper is not None and helper_model is None and not getattr(family, "self_draft", None):
        early_exit = int(family.helper.n_layers)
    pad = getattr(family.tokenizer, "pad_token_id", None)
    return HFReference(model, family.stop_ids, pad_id=pad, helper_model=helper_model, early_exit_layer=early_exit)
