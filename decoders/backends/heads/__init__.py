"""Trained draft heads (EAGLE-1/2, EAGLE-3, Medusa): read from their published formats and drafting
from the target's own hidden states. `head_draft` builds the draft backend for a loaded target."""

from __future__ import annotations


def head_draft(folder, target, model, vocab: tuple[int, str] | None = None):
    """The draft backend of the head in ``folder`` for ``target`` (a backend) over the transformers
    ``model`` (its embedding and LM head); ``vocab``: FR-Spec's (size, ranking source), for an
    EAGLE-1/2 head (`decoders.backends.heads.fr_spec`)."""
    from decoders.backends.heads.draft import HeadDraft
    from decoders.backends.heads.load import load_head
    from decoders.backends.heads.medusa import MedusaDraft, MedusaHeads

    head = load_head(folder, model)
    if isinstance(head, MedusaHeads):
        if vocab is not None:
            from decoders.core.errors import DecodeError

            raise DecodeError("--head-vocab applies to EAGLE-1/2 heads, which share the target's LM head; Medusa heads "
                              "have their own. Leave --head-vocab out.")
        return MedusaDraft(head.to(target.device), target, source=f"medusa heads {folder}")
    if vocab is not None:
        from decoders.backends.heads.fr_spec import ranked_ids, restrict

        size, source = vocab
        restrict(head, ranked_ids(source, head.config.vocab), size)
    embed = model.get_input_embeddings().weight.detach()
    kind = head.config.kind + (f", FR-Spec {head.config.draft_vocab} tokens" if vocab is not None else "")
    return HeadDraft(head.to(target.device), target, embed, source=f"{kind} head {folder}")
