"""The batch bench's spec row (`decoders.bench.batch`): which draft of a loaded family drafts at
batch B (`check_spec`, one line where none can) and what drafts batched (`spec_drafts`): a model
draft (`draft_module`: the helper model itself, or the main model's int4 copy,
`decoders.backends.batched_int4`, for the int4 self-draft) or the trained head over the target's
hidden states (`decoders.methods.batch.head_draft`)."""

from __future__ import annotations

from decoders.core.errors import DecodeError
from decoders.methods.batch.model_draft import unbatched_draft


def draft_kind(family) -> str | None:
    """The kind of ``family``'s draft ("helper", "int4", "head", "early-exit"; None: none loaded)."""
    return family.draft.kind if family.helper is not None and family.draft is not None else None


def check_spec(family) -> None:
    """DecodeError in one line where ``family`` cannot run the spec row at batch B: on llama.cpp, a
    draft of a kind that does not draft batched (`BATCHED_DRAFTS`), or a model the batched path or
    the int4 kernel cannot take."""
    from decoders.backends.llamacpp import LlamaCppBackend

    if isinstance(family.main, LlamaCppBackend):
        raise DecodeError("--batch runs spec on the torch backend only (drafting with a helper model, the int4 "
                          "self-draft or a trained head); drop spec from --methods or use --backend torch")
    kind = draft_kind(family)
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
    """The transformers module that drafts for ``family`` at batch B (`check_spec` first; not for a head)."""
    if draft_kind(family) == "int4":
        from decoders.backends.batched_int4 import int4_copy

        return int4_copy(family.main_model)
    return family.helper_model


def spec_drafts(family, specs):
    """For each row spec and the target batch it verifies with, a fresh batched draft where it is a
    spec row drafting its ``k`` tokens (None for the rows that draft without one): a model draft,
    or a trained head reading that target's hidden states. `check_spec` runs first, once, and only
    where some row is a spec row."""
    if not any(spec.method == "spec" for spec in specs):
        return lambda spec, target: None
    check_spec(family)
    if draft_kind(family) == "head":
        from decoders.backends.heads.batched import batched_head
        from decoders.methods.batch.head_draft import HeadDraft

        def head(spec, target):
            made = batched_head(family.helper)
            assert made is not None  # check_spec refused any other
            return HeadDraft(target, made[0], made[1], spec.k) if spec.method == "spec" else None

        return head
    from decoders.backends.batched import BatchedLM
    from decoders.methods.batch.model_draft import ModelDraft

    module = draft_module(family)
    return lambda spec, target: ModelDraft(BatchedLM(module, family.context_length), spec.k) \
        if spec.method == "spec" else None
