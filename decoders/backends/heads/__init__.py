"""Trained draft heads (EAGLE-1/2, EAGLE-3, Medusa): read from their published formats and drafting
from the target's own hidden states. `head_draft` builds the draft backend for a loaded target."""

from __future__ import annotations


def head_draft(folder, target, model):
    """The draft backend of the head in ``folder`` for ``target`` (a backend) over the transformers
    ``model`` (its embedding and LM head)."""
    from decoders.backends.heads.draft import HeadDraft
    from decoders.backends.heads.load import load_head
    from decoders.backends.heads.medusa import MedusaDraft, MedusaHeads

    head = load_head(folder, model)
    if isinstance(head, MedusaHeads):
        return MedusaDraft(head.to(target.device), target, source=f"medusa heads {folder}")
    embed = model.get_input_embeddings().weight.detach()
    return HeadDraft(head.to(target.device), target, embed, source=f"{head.config.kind} head {folder}")
