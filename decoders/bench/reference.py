"""transformers' side of the benchmark: the same model, prompt and token budget through
`generate()`, so that every figure of ours has a reference measured in the same run.

Which call is a method's counterpart is declared on the method (`Method.counterpart`: the
keyword arguments of ``generate()`` for its parameters, or assisted generation with so many
drafts per iteration); this module makes the call, always greedy (``do_sample=False``) with the
engine's stop tokens. Assisted generation uses ``assistant_model=`` for a helper model or
``assistant_early_exit=L`` for self-drafting, with ``num_assistant_tokens`` on a constant
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
from typing import TYPE_CHECKING, Any, Collection, Iterator, Protocol, Sequence

from decoders.bench.common import BASELINE
from decoders.core.declarations import Counterpart, get_method
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.models.drafts import EarlyExit

if TYPE_CHECKING:
    from decoders.models.family import Family


@dataclass
class HFRun:
    """One transformers decode: the tokens it produced and what they cost."""

    method: str  # the method whose counterpart it is
    label: str
    ids: list[int]  # new tokens only (prompt excluded)
    wall_ms: float  # the whole generate() call, prefill included (as our runs' wall time)
    target_forwards: int
    draft_forwards: int
    finish: str  # eos | length
    first_token_ms: float | None = None  # the time to the first token, where the loop yields it (llama.cpp's)

    @property
    def ms_per_token(self) -> float:
        return self.wall_ms / max(len(self.ids), 1)

    @property
    def tau(self) -> float | None:
        return len(self.ids) / self.target_forwards if self.target_forwards else None


@dataclass(frozen=True)
class ArGoal:
    """The target our autoregressive decoding is judged by against a reference's: ms/token ours over
    theirs at most ``limit`` (``other``: how the target's line names their side). ``decode``: judged on
    decode ms/token (after the first token: the loop alone), where both sides time their first token;
    the prefill is then the same call on both sides, and on long prompts its time would swamp the loop's."""

    key: str
    text: str
    limit: float
    other: str
    decode: bool = False


#: Our autoregressive ms/token at most this share of transformers' generate().
AR_RATIO_TARGET = 0.8


class Reference(Protocol):
    """What the bench needs of the other side it measures every row beside: transformers'
    `HFReference` on the torch backend, llama-cpp-python's own loop
    (`decoders.bench.llamacpp_reference.LlamaCppReference`) on the llama.cpp backend."""

    name: str  # "transformers", "llama-cpp-python"
    short: str  # the report's column prefix: "tf", "lcpp"
    ar_goal: ArGoal
    helper_model: Any
    early_exit_layer: int | None

    @property
    def has_assistant(self) -> bool: ...

    def available(self, method: str) -> bool: ...

    def counterpart(self, method: str, params: DecodeParams) -> str | None: ...

    def greedy(self, prompt_ids: Sequence[int], max_new_tokens: int) -> HFRun: ...

    def run(self, method: str, prompt_ids: Sequence[int], params: DecodeParams) -> HFRun | None: ...


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
        self._handle: Any = None  # the hook's handle while counting (`__enter__`)

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
    (self-draft with the first L layers) decide what assisted generation uses; with neither, a
    method whose counterpart is assisted generation has none, as it has no helper in the engine.
    """

    name = "transformers"
    short = "tf"
    ar_goal = ArGoal("ar_vs_transformers", "autoregressive ms/token vs transformers generate()", AR_RATIO_TARGET,
                     "transformers")

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

    def _counterpart(self, method: str) -> Counterpart | None:
        """``method``'s declared counterpart, when this model can run it (None: it has none, or it
        is assisted generation and nothing can assist)."""
        try:
            counterpart = get_method(method).counterpart
        except DecodeError:  # a method this version does not have
            return None
        if counterpart is None or (counterpart.assistant_tokens is not None and not self.has_assistant):
            return None
        return counterpart

    def available(self, method: str) -> bool:
        return self._counterpart(method) is not None

    @property
    def assistant(self) -> str:
        """What assisted generation drafts with, as labels say it: "helper" or "early exit @ L"."""
        return "helper" if self.helper_model is not None else f"early exit @ {self.early_exit_layer}"

    def _config(self, max_new_tokens: int, **extra):
        from transformers import GenerationConfig

        # a fresh config: the checkpoint's own defaults (sampling flags, penalties) must not leak in
        settings: dict[str, Any] = dict(do_sample=False, num_beams=1, max_new_tokens=max_new_tokens, min_new_tokens=0,
                                        eos_token_id=self.stop_ids, pad_token_id=self.pad_id, use_cache=True)
        return GenerationConfig(**{**settings, **extra})

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
        """transformers' counterpart of the baseline: its autoregressive ``generate()``."""
        run = self.run(BASELINE, prompt_ids, DecodeParams(method=BASELINE, max_new_tokens=max_new_tokens))
        if run is None:
            raise DecodeError(f"the baseline method {BASELINE!r} declares no transformers counterpart")
        return run

    def assisted(self, method: str, label: str, prompt_ids: Sequence[int], max_new_tokens: int,
                 drafts: int) -> HFRun:
        """Assisted generation with ``drafts`` drafts per iteration (helper model or early exit)."""
        if self.helper_model is not None:
            with assistant_settings(self.helper_model, drafts):
                return self._generate(method, label, prompt_ids, max_new_tokens, [self.model, self.helper_model],
                                      generation_config=self._config(max_new_tokens),
                                      assistant_model=self.helper_model)
        if self.early_exit_layer is not None:
            with assistant_settings(self.model, drafts):
                config = self._config(max_new_tokens, assistant_early_exit=self.early_exit_layer)
                return self._generate(method, label, prompt_ids, max_new_tokens, [self.model],
                                      generation_config=config)
        raise DecodeError("assisted generation needs a helper model or an early-exit layer; "
                          "give --helper SRC or --self-draft-layer L")

    def run(self, method: str, prompt_ids: Sequence[int], params: DecodeParams) -> HFRun | None:
        """transformers' counterpart of our ``method`` with ``params``' budget and the parameters
        its declaration passes on, or None where it has none."""
        counterpart = self._counterpart(method)
        if counterpart is None:
            return None
        n = params.max_new_tokens
        if counterpart.assistant_tokens is not None:
            return self.assisted(method, counterpart.label(params, self.assistant), prompt_ids, n,
                                 counterpart.assistant_tokens(params))
        return self._generate(method, counterpart.label(params, None), prompt_ids, n, [self.model],
                              generation_config=self._config(n, **counterpart.options(params)))

    def counterpart(self, method: str, params: DecodeParams) -> str | None:
        """The ``generate()`` call that :meth:`run` makes for ``method``, as the report shows it."""
        counterpart = self._counterpart(method)
        if counterpart is None:
            return None
        if counterpart.assistant_tokens is not None:
            how = (f"assistant_early_exit={self.early_exit_layer}" if self.helper_model is None
                   else "assistant_model=helper")
            return (f"generate({how}, num_assistant_tokens={counterpart.assistant_tokens(params)}, "
                    "num_assistant_tokens_schedule='constant', assistant_confidence_threshold=0)")
        options = counterpart.options(params) or {"do_sample": False}
        return "generate(" + ", ".join(f"{key}={value!r}" for key, value in options.items()) + ")"


def reference_for(family: Family) -> Reference:
    """The family's reference: llama-cpp-python's own loop on a llama.cpp family's GGUF file
    (`decoders.bench.llamacpp_reference`), else transformers on the family's own model objects
    (same weights, same stop tokens).

    A helper with no transformers model of its own is an early-exit view of the main model, so
    transformers' counterpart is ``assistant_early_exit`` at the helper's depth.
    """
    if family.backend == "llamacpp":
        from decoders.bench.llamacpp_reference import llamacpp_reference_for

        return llamacpp_reference_for(family)
    model = family.main_model
    if model is None:
        model = transformers_model(family.main)
    helper_model = family.helper_model
    early_exit = None
    if family.helper is not None and helper_model is None and isinstance(family.draft, EarlyExit):
        early_exit = int(family.draft.layer)
    pad = getattr(family.tokenizer, "pad_token_id", None)
    return HFReference(model, family.stop_ids, pad_id=pad, helper_model=helper_model, early_exit_layer=early_exit)
