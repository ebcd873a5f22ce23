"""How each built-in kind of draft is built from a loaded main model (`decoders.models.drafts.DraftTarget`),
and why a target cannot have it, without building it. Each kind's declaration in
`decoders.models.drafts` names its builder here; `decoders.models.drafts.build_draft` runs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from decoders.core.errors import DecodeError

if TYPE_CHECKING:
    from decoders.backends.hf import Backend
    from decoders.models.drafts import Draft, DraftTarget, EarlyExit, Int4, TrainedHead


def load_time_only(draft: Draft, target: DraftTarget) -> Backend:
    raise DecodeError(f"The {draft.view()} draft is chosen when the family loads; pick int4 or head here.")


def early_exit(draft: EarlyExit, target: DraftTarget) -> Backend:
    layers = int(target.main.n_layers or 0)
    if not 1 <= draft.layer < layers:
        raise DecodeError(f"Self-draft layer {draft.layer} is out of range: the main model has {layers} layers, "
                          f"so choose a layer from 1 to {layers - 1}.")
    return target.main.early_exit(draft.layer)


def early_exit_unavailable(target: DraftTarget) -> str | None:
    layers = int(target.main.n_layers or 0)
    return None if layers > 1 else "the main model has a single layer, so it has no early exit"


def int4(draft: Int4, target: DraftTarget) -> Backend:
    from decoders.models.backend_choice import quantized_draft

    if target.device_map:
        raise DecodeError("An int4 self-draft needs the whole main model on one device, and a device map spreads "
                          "this one; draft another way.")
    return quantized_draft(target.main, target.main_model, "int4")


def int4_unavailable(target: DraftTarget) -> str | None:
    if target.main_model is None:
        return "the family does not expose its transformers model to quantize"
    from decoders.backends.quantized import unsupported_reason

    return unsupported_reason(target.main_model, "int4", device=target.main.device)


def head(draft: TrainedHead, target: DraftTarget) -> Backend:
    from decoders.models.backend_choice import trained_head
    from decoders.models.drafts import resolve_head

    head = draft if draft.folder is not None or target.head is None else target.head
    if head.folder is None or head.folder == "bundled" or (head.vocab is not None and head.vocab_from is None):
        resolved = resolve_head(head, target.main_name)
        assert resolved is not None  # missing_ok False: DecodeError instead
        head = resolved
    vocab = (head.vocab, head.vocab_from) if head.vocab is not None and head.vocab_from is not None else None
    return trained_head(target.main, target.main_model, head.folder, vocab)


def head_unavailable(target: DraftTarget) -> str | None:
    if target.main_model is None:
        return "the family does not expose its transformers model to quantize"
    return None if target.head is not None else \
        "no trained head for this main model (give --head FOLDER, or train one with tui-decode train-head)"
