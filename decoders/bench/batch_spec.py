"""The batch bench's spec row (`decoders.bench.batch`): which draft of a loaded family drafts at
batch B (`check_spec`, one line where none can) and the transformers module it runs batched
(`draft_module`): the helper model itself, or the main model's int4 copy
(`decoders.backends.batched_int4`) for the int4 self-draft."""

from __future__ import annotations

from decoders.core.errors import DecodeError
from decoders.methods.batch.model_draft import BATCHED_DRAFTS, unbatched_draft


def draft_kind(family) -> str | None:
    """The kind of ``family``'s draft ("helper", "int4", "head", "early-exit"; None: none loaded)."""
    return family.draft.kind if family.helper is not None and family.draft is not None else None


def check_spec(family) -> None:
    """DecodeError in one line where ``family`` cannot run the spec row at batch B: on llama.cpp, a
    draft of a kind that does not draft batched (`BATCHED_DRAFTS`), or a model the batched path or
    the int4 kernel cannot take."""
    from decoders.backends.llamacpp import LlamaCppBackend

    if isinstance(family.main, LlamaCppBackend):
        raise DecodeError(f"--batch runs spec on the torch backend only (drafting with a {' or '.join(BATCHED_DRAFTS)} "
                          "draft); drop spec from --methods or use --backend torch")
    kind = draft_kind(family)
    reason = unbatched_draft(kind)
    model = family.helper_model if kind == "helper" else family.main_model
    if reason is None and model is None:
        reason = f"the {kind} draft keeps no transformers model to draft with at batch > 1; load one with --helper SRC"
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
    """The transformers module that drafts for ``family`` at batch B (`check_spec` first)."""
    if draft_kind(family) == "int4":
        from decoders.backends.batched_int4 import int4_copy

        return int4_copy(family.main_model)
    return family.helper_model


def spec_drafts(family, specs):
    """For each row spec, a fresh batched model draft where it is a spec row drafting its ``k``
    tokens (None for the rows that draft without a model); `check_spec` runs first, once, and
    only where some row is a spec row."""
    if not any(spec.method == "spec" for spec in specs):
        return lambda spec: None
    from decoders.backends.batched import BatchedLM
    from decoders.methods.batch.model_draft import ModelDraft

    check_spec(family)
    module = draft_module(family)
    return lambda spec: ModelDraft(BatchedLM(module, family.context_length), spec.k) if spec.method == "spec" else None
