"""llama.cpp's side of the benchmark: llama-cpp-python's own greedy loop on the same GGUF file.

What `decoders.bench.reference` is to the torch backend (transformers' ``generate()`` on the same
weights), this is to the llama.cpp backend: the high-level ``llama_cpp.Llama`` on the file the
engine's `LlamaCppBackend` loaded, with the same prompt ids, token budget, stop tokens and threads,
decoding greedily (``Llama.generate(temp=0)``: llama.cpp's greedy sampler). Which call is a
method's counterpart is declared on the method (`Method.llamacpp_counterpart`): plain greedy
decoding, or prompt lookup through ``llama_cpp.llama_speculative.LlamaPromptLookupDecoding``.

Two settings differ from ``Llama``'s defaults, so that the loop is what is compared, not the
context around it:

* ``flash_attn=True``: the engine's context leaves flash attention on llama.cpp's ``auto``, which
  picks it on the CPU; with ``Llama``'s default (off) the attention sums in another order, so the
  two part at the first near-tie (the bundled model: position 28 of a 64-token answer) and the
  loop decodes about 10% slower;
* ``n_batch`` of the whole context (``n_ubatch`` 512, as the engine's): a prompt is one
  ``llama_decode``, i.e. one target forward, on both sides.

The context is sized to the longest run asked for (a prompt lookup context keeps every row of
logits, ``n_ctx x vocab`` floats), and made again, untimed, when a longer prompt comes.
Target forwards are counted as ``Llama.eval`` calls (one ``llama_decode`` each).

llama_cpp is imported when a reference is made, never at module import.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Sequence

from decoders.bench.common import BASELINE
from decoders.bench.reference import ArGoal, HFRun
from decoders.core.declarations import LoopCounterpart, get_method
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams

if TYPE_CHECKING:
    from decoders.models.family import Family

#: The engine's autoregressive decoding on llama.cpp against llama-cpp-python's own greedy loop.
AR_RATIO_TARGET = 1.15
#: How reports name this side (report.json: settings.reference).
LLAMACPP_REFERENCE = "llama-cpp-python"
#: Contexts are made in steps of this many positions (so that most prompts reuse one).
CONTEXT_STEP = 512
#: llama.cpp's micro-batch, as the engine's context uses it.
UBATCH = 512
GREEDY = {"temp": 0.0, "top_k": 1, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0}


class LlamaCppReference:
    """Runs llama-cpp-python's greedy ``Llama.generate`` variants on one GGUF file."""

    name = LLAMACPP_REFERENCE  # how the report names this side
    short = "lcpp"  # its column prefix
    ar_goal = ArGoal("ar_vs_llama_cpp", "autoregressive decode ms/token vs llama-cpp-python's own greedy loop",
                     AR_RATIO_TARGET, "llama-cpp-python", decode=True)
    # assisted generation has no llama-cpp-python counterpart here (`Drafts.reference_for` sets these)
    helper_model = None
    early_exit_layer: int | None = None
    has_assistant = False

    def __init__(self, path: str | Path, stop_ids: Collection[int], max_positions: int, flash_attn: bool = True):
        from decoders.backends.llamacpp_model import load_llama_cpp

        self.lib = load_llama_cpp()
        self.path = Path(path)
        self.stop_ids = sorted({int(t) for t in stop_ids})
        if not self.stop_ids:
            raise DecodeError("the model family has no stop tokens; the benchmark needs the engine's stop ids")
        self.max_positions = int(max_positions)
        self.flash_attn = flash_attn
        self._models: dict[bool, Any] = {}  # lookup: whether the context drafts by prompt lookup

    # -- what the bench asks ---------------------------------------------------------------------

    def _counterpart(self, method: str) -> LoopCounterpart | None:
        try:
            return get_method(method).llamacpp_counterpart
        except DecodeError:  # a method this version does not have
            return None

    def available(self, method: str) -> bool:
        return self._counterpart(method) is not None

    def counterpart(self, method: str, params: DecodeParams) -> str | None:
        """The call :meth:`run` makes for ``method``, as the report shows it."""
        counterpart = self._counterpart(method)
        if counterpart is None:
            return None
        settings = f"flash_attn={self.flash_attn}"
        if counterpart.prompt_lookup is not None:
            kwargs = ", ".join(f"{k}={v}" for k, v in counterpart.prompt_lookup(params).items())
            settings = f"draft_model=LlamaPromptLookupDecoding({kwargs}), {settings}"
        return f"Llama({settings}).generate(temp=0)"

    def greedy(self, prompt_ids: Sequence[int], max_new_tokens: int) -> HFRun:
        """llama-cpp-python's counterpart of the baseline: its own greedy loop."""
        run = self.run(BASELINE, prompt_ids, DecodeParams(method=BASELINE, max_new_tokens=max_new_tokens))
        if run is None:
            raise DecodeError(f"the baseline method {BASELINE!r} declares no llama-cpp-python counterpart")
        return run

    def run(self, method: str, prompt_ids: Sequence[int], params: DecodeParams) -> HFRun | None:
        """llama-cpp-python's counterpart of our ``method`` with ``params``' budget, or None."""
        counterpart = self._counterpart(method)
        if counterpart is None:
            return None
        n = params.max_new_tokens
        lookup = counterpart.prompt_lookup(params) if counterpart.prompt_lookup is not None else None
        llm = self._llama(lookup is not None, len(prompt_ids) + n + (lookup or {}).get("num_pred_tokens", 0) + 1)
        if lookup is not None:
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            llm.draft_model = LlamaPromptLookupDecoding(**lookup)
        return self._generate(llm, method, counterpart.label(params), prompt_ids, n)

    # -- internals ---------------------------------------------------------------------------------

    def _llama(self, lookup: bool, positions: int):
        """The context for plain or prompt-lookup decoding, holding at least ``positions`` positions."""
        import torch

        llm = self._models.get(lookup)
        if llm is not None and llm.n_ctx() >= positions:
            return llm
        if positions > self.max_positions:
            raise DecodeError(f"the run needs {positions} positions, beyond the {self.max_positions} of the model's "
                              "context; lower --max-new-tokens or use shorter prompts")
        n_ctx = min(self.max_positions, -(-positions // CONTEXT_STEP) * CONTEXT_STEP)
        self._models.pop(lookup, None)  # the old context goes before the new one is made
        threads = torch.get_num_threads()
        kwargs: dict[str, Any] = {}
        if lookup:
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            kwargs["draft_model"] = LlamaPromptLookupDecoding()
        try:
            llm = self.lib.Llama(str(self.path), n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=min(UBATCH, n_ctx),
                                 n_threads=threads, n_threads_batch=threads, n_gpu_layers=0,
                                 flash_attn=self.flash_attn, verbose=False, **kwargs)
        except (ValueError, RuntimeError) as exc:
            raise DecodeError(f"llama-cpp-python cannot load {self.path.name} for the bench's counterpart: "
                              f"{str(exc).splitlines()[0][:200]}") from None
        self._models[lookup] = llm
        return llm

    def _generate(self, llm, method: str, label: str, prompt_ids: Sequence[int], max_new_tokens: int) -> HFRun:
        evals = 0
        eval_tokens = llm.eval

        def counted(tokens):
            nonlocal evals
            evals += 1
            return eval_tokens(tokens)

        llm.reset()  # no prefix reuse from the last run: the prompt is decoded again, as ours is
        llm.eval = counted
        new: list[int] = []
        first: float | None = None
        stops = set(self.stop_ids)
        try:
            t0 = time.perf_counter()
            for token in llm.generate(list(prompt_ids), **GREEDY):
                if first is None:
                    first = time.perf_counter() - t0
                new.append(int(token))
                if token in stops or len(new) >= max_new_tokens:
                    break
            wall = time.perf_counter() - t0
        finally:
            del llm.eval  # the class's own method again
        finish = "eos" if new and new[-1] in stops else "length"
        return HFRun(method, label, new, round(1000 * wall, 3), evals, 0, finish,
                     first_token_ms=None if first is None else round(1000 * first, 3))


def llamacpp_reference_for(family: Family) -> LlamaCppReference:
    """llama-cpp-python on the GGUF file the family's llama.cpp backend loaded (same stop tokens)."""
    from decoders.backends.llamacpp import LlamaCppBackend

    path = family.main.model.path if isinstance(family.main, LlamaCppBackend) else None
    if path is None:
        raise DecodeError("the llama.cpp family does not name its GGUF file, so the benchmark cannot run "
                          "llama-cpp-python's own loop beside the engine")
    return LlamaCppReference(path, family.stop_ids, family.context_length)
