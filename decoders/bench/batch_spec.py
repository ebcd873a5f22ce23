"""The batch bench's spec row (`decoders.bench.batch`): which draft of a loaded family drafts at
batch B (`check_spec`, one line where none can) and what it drafts with: on torch the transformers
module it runs batched (`draft_module`: the helper model itself, or the main model's int4 copy,
`decoders.backends.batched_int4`) or the trained head over the target's hidden states
(`decoders.methods.batch.head_draft`); on llama.cpp the GGUF helper's model in a `LlamaCppBatched`
context of its own per batch size (its sequence ids, in one ``llama_decode`` per draft step)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from decoders.core.errors import DecodeError
from decoders.methods.batch.model_draft import unbatched_draft

if TYPE_CHECKING:
    from decoders.methods.batch.chain import BatchDraft


def draft_kind(family) -> str | None:
    """The kind of ``family``'s draft ("helper", "int4", "head", "early-exit"; None: none loaded)."""
    return family.draft.kind if family.helper is not None and family.draft is not None else None


def llamacpp_helper(family):
    """The llama.cpp model of ``family``'s GGUF helper (None: not a llama.cpp family, or no helper)."""
    from decoders.backends.llamacpp import LlamaCppBackend

    if isinstance(family.main, LlamaCppBackend) and isinstance(family.helper, LlamaCppBackend):
        return family.helper.model
    return None


def check_spec(family) -> None:
    """DecodeError in one line where ``family`` cannot run the spec row at batch B: a draft of a
    kind that does not draft batched on its backend (`unbatched_draft`: on llama.cpp, anything but
    a GGUF helper), or on torch a model the batched path or the int4 kernel cannot take."""
    from decoders.backends.llamacpp import LlamaCppBackend

    kind = draft_kind(family)
    if isinstance(family.main, LlamaCppBackend):
        reason = unbatched_draft(kind, "llamacpp")
        if reason is None and llamacpp_helper(family) is None:
            reason = "the helper keeps no llama.cpp model to draft with at batch > 1; give --helper FILE.gguf"
        if reason is not None:
            raise DecodeError(reason)
        return
    reason = unbatched_draft(kind)
    model = family.helper_model if kind == "helper" else family.main_model
    if reason is None and model is None:
        reason = f"the {kind} draft keeps no transformers model to draft with at batch > 1; load one with --helper SRC"
    if reason is None and kind == "head":
        from decoders.backends.heads.batched import batched_head

        if batched_head(family.helper) is None:
            reason = "the head draft at batch > 1 takes an EAGLE-1/2, EAGLE-3 or Medusa head loaded with --head FOLDER"
    if reason is None:
        from decoders.backends.batched import batch_unsupported

        why = batch_unsupported(model)
        if why is None and kind == "int4":
            from decoders.backends.quantized import unsupported_reason

            why = unsupported_reason(model, "int4")
        reason = None if why is None else f"the {kind} draft cannot draft at batch > 1: {why}"
    if reason is not None:
        raise DecodeError(reason)


def draft_module(family):
    """The transformers module that drafts for ``family`` at batch B on torch (`check_spec` first; not
    for a head)."""
    if draft_kind(family) == "int4":
        from decoders.backends.batched_int4 import int4_copy

        return int4_copy(family.main_model)
    return family.helper_model


def spec_drafts(family, specs, positions: int) -> Callable[..., BatchDraft | None]:
    """For a row spec, a batch size and the target batch it verifies with (a head needs it), a fresh
    batched draft where it is a spec row drafting its ``k`` tokens (None for the rows that draft
    without one): a model draft (each row holds up to ``positions`` tokens), or on torch a trained
    head reading that target's hidden states. On llama.cpp the draft's context of each batch size is made once and
    reused (`LlamaCppBatched.start` clears it). `check_spec` runs first, once, and only where some
    row is a spec row."""
    if not any(spec.method == "spec" for spec in specs):
        return lambda spec, size, target=None: None
    from decoders.methods.batch.model_draft import ModelDraft

    check_spec(family)
    helper = llamacpp_helper(family)
    if helper is not None:
        from decoders.backends.llamacpp_batched import LlamaCppBatched

        contexts: dict[int, LlamaCppBatched] = {}

        def on_llamacpp(spec, size: int, target=None) -> ModelDraft | None:
            if spec.method != "spec":
                return None
            if size not in contexts:
                contexts[size] = LlamaCppBatched(helper, size, positions)
            return ModelDraft(contexts[size], spec.k)

        return on_llamacpp
    if draft_kind(family) == "head":
        from decoders.backends.heads.batched import batched_head
        from decoders.methods.batch.head_draft import HeadDraft

        def head(spec, size: int, target=None) -> HeadDraft | None:
            made = batched_head(family.helper)
            assert made is not None and target is not None  # check_spec refused any other; a head reads its target
            return HeadDraft(target, made[0], made[1], spec.k) if spec.method == "spec" else None

        return head
    from decoders.backends.batched import BatchedLM

    module = draft_module(family)
    return lambda spec, size, target=None: (ModelDraft(BatchedLM(module, family.context_length), spec.k)
                                            if spec.method == "spec" else None)

