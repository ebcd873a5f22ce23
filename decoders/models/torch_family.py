"""A family run by torch (`--backend torch`, the default): the main model loaded by transformers,
its fast backend made, the draft loaded or built (a helper model, an early exit, the int4
self-draft, a trained head, or the faster of those measured at load), the dtype chosen, each
backend warmed up. `decoders.models.family.load_family` calls it (as it calls
`decoders.models.llamacpp_family` for a llama.cpp family).
"""

from __future__ import annotations

from typing import Any

from decoders.core.errors import DecodeError
from decoders.core.events import LoadProgress
from decoders.models.backend_choice import make_backend, resolve_device, resolve_dtype, warm_up
from decoders.models.drafts import (
    DraftTarget,
    EarlyExit,
    Fastest,
    HelperModel,
    TrainedHead,
    build_draft,
    head_of,
    kind_of,
    resolve_head,
    source_of,
)
from decoders.models.family import Family, context_length, stop_token_ids
from decoders.models.family_spec import FamilySpec
from decoders.models.sources import classify_source, default_label, load_source, scaled_progress


def load_torch_family(spec: FamilySpec, report: LoadProgress, fast: bool, loaded: dict[str, Any]) -> Family:
    from decoders.models.layer_count import check_draft_layer

    check_draft_layer(spec)  # before the load, where the model's header or config.json gives its depth
    device = resolve_device(spec.device)
    dtype = resolve_dtype(spec.dtype, device)
    device_map = check_device_map(spec, device)
    from decoders.backends.fp16_cpu import load_dtype_for

    load_dtype = load_dtype_for(device, dtype, fast, device_map)  # float32 for float16 weights on CPU
    fp16_weights = load_dtype is not dtype
    if spec.cuda_graph == "on" and device.type != "cuda":
        raise DecodeError(f"CUDA graphs need a CUDA device, and this family runs on {device.type}; "
                          "use --cuda-graph auto or off.")
    for source in (spec.main, spec.helper):
        if source:
            classify_source(source)  # a mistyped helper path fails now, not after the main model loads
    main_share = 0.75 if spec.helper else 1.0

    main_model, tokenizer, main_source = load_source(
        spec.main, device, load_dtype, "main", scaled_progress(report, 0.0, 0.8 * main_share), device_map
    )
    loaded["main_model"] = main_model
    positions = context_length(main_model, tokenizer)
    stop_ids = stop_token_ids(main_model, tokenizer)
    from decoders.models.load_choice import LoadChoice

    # "fastest" dtype and draft: a choice kept on this machine says which to build; else measured below
    choice = LoadChoice.start(spec, device, fast, device_map, main_model, tokenizer, report, stop_ids)
    if fp16_weights:  # --dtype float16 on CPU: asked for, so no room for it is an error, not a segfault
        from decoders.models.load_choice import float16_room

        short = float16_room(main_model)
        if short is not None:
            raise DecodeError(f"Not enough memory for float16 weights: {short}; give --dtype float32, or a smaller "
                              "model.")
    fp16_weights = fp16_weights or choice.float16
    report("Preparing the main model's fast backend (weights fused and packed)", 0.8 * main_share)
    main_backend = make_backend(main_model, fast=fast, max_positions=positions, cuda_graph=spec.cuda_graph,
                                fp16_weights=fp16_weights)
    if device_map is not None:
        device = main_backend.device  # where the inputs go: the embedding's device
        from decoders.backends.llama_fast import LlamaBackend, unsupported_reason

        if fast and not isinstance(main_backend, LlamaBackend):
            report(f"Running on the transformers backend: the fast backend cannot ({unsupported_reason(main_model)})",
                   main_share)
    vocab_size = int(main_model.get_output_embeddings().weight.shape[0])
    main_backend, chosen16 = choice.target(
        main_backend, lambda: make_backend(main_model, fast=fast, max_positions=positions, fp16_weights=True))
    fp16_weights = fp16_weights or chosen16

    helper_backend = None
    helper_model = None
    helper_source = None
    draft = spec.draft
    head = head_of(draft) or TrainedHead()
    head_at_hand = resolve_head(head, spec.main, missing_ok=True)  # later drafts may switch to it
    if isinstance(draft, HelperModel):
        helper_model, helper_tokenizer, helper_source = load_source(
            draft.source, device, load_dtype, "helper", scaled_progress(report, main_share, 1.0), device_map
        )
        _check_shared_vocabulary(spec, tokenizer, main_model, helper_tokenizer, helper_model)
        # a helper with a shorter context bounds the pair: checked up front, not midway
        positions = min(positions, context_length(helper_model, helper_tokenizer))
        helper_backend = make_backend(helper_model, fast=fast, max_positions=positions, cuda_graph=spec.cuda_graph,
                                      fp16_weights=fp16_weights)
    elif isinstance(draft, Fastest):  # kept, or measured: int4 or the trained head (and the dtype with it)
        main_backend, helper_backend, helper_source, kind, chosen16 = choice.draft(main_backend)
        draft = head_at_hand if kind == "head" and head_at_hand is not None else kind_of(kind).default()
        fp16_weights = fp16_weights or chosen16
    elif draft is not None:  # any other kind: built from the main model by its declared builder
        if not isinstance(draft, EarlyExit):
            report(kind_of(draft.kind).loading or f"Building the {draft.view()} from the main model", 0.9)
        helper_backend = build_draft(draft, DraftTarget(main_backend, main_model, spec.main, device_map, spec.backend,
                                                        head_at_hand))
        helper_source = source_of(draft, helper_backend)

    if fp16_weights:
        import torch

        dtype = torch.float16  # float16 weights on the float32 model (the record says so)
    report("Warming up (a first forward of each model)", 0.95)
    for backend in (main_backend, helper_backend):
        if backend is not None:
            warm_up(backend)
    choice.finish()
    report("Models ready", 1.0)
    return Family(
        label=spec.label or default_label(spec.main),
        main=main_backend,
        helper=helper_backend,
        tokenizer=tokenizer,
        stop_ids=stop_ids,
        device=device,
        dtype=dtype,
        main_source=main_source,
        helper_source=helper_source,
        context_length=positions,
        vocab_size=vocab_size,
        main_model=main_model,
        helper_model=helper_model,
        draft=draft,
        head=head_at_hand,
        draft_choice=choice.draft_record,
        dtype_choice=choice.dtype_record,
        device_map=_map_text(main_model, device_map),
        choice_note=choice.note,
        choice_date=choice.date,
        choice_reused=choice.kept is not None,
    )



def out_of_memory(spec: FamilySpec, main_model: Any) -> DecodeError:
    """The one line for an allocation that failed while ``spec`` loaded: the float32 weights (and
    the float16 copy packed beside them to time it, where the dtype is chosen), and the way out."""
    from decoders.models.memory import out_of_memory

    label = spec.label or default_label(spec.main)
    needed = None
    if main_model is not None:
        weights = sum(p.numel() for p in main_model.parameters())
        from decoders.models.load_choice import PACKING_BYTES

        needed = weights * 4 + (weights * PACKING_BYTES if spec.dtype in ("fastest", "float16") else 0)
    if spec.dtype in ("fastest", "float16", "auto"):
        fix = ("give --dtype float32 (one copy of the weights: no float16 copy packed and timed beside it), "
               "or a smaller model")
    else:
        fix = "choose a smaller model, or free memory (raise the limit: ulimit -v) and try again"
    return out_of_memory(f"load {label}", needed, fix)



def _map_text(model, device_map) -> str | None:
    """The device map as recorded: the devices it used, e.g. "auto: cpu, disk"."""
    if device_map is None:
        return None
    used = sorted({str(d) for d in (getattr(model, "hf_device_map", None) or {}).values()})
    name = device_map if isinstance(device_map, str) else "custom"
    return f"{name}: {', '.join(used)}" if used else name



def check_device_map(spec: FamilySpec, device):
    """The family's device map, checked (`decoders.models.sources.check_device_map`), or None.

    A quantized self-draft packs the main model's weights on one device, so it cannot take a
    model spread by a device map.
    """
    if spec.device_map is None:
        return None
    from decoders.models.sources import check_device_map as checked

    device_map = checked(spec.device_map)
    if spec.self_draft:
        what = {"fastest": "The family's draft (the faster of its int4 self-draft and trained head, chosen at load)",
                "head": "A trained head"}.get(spec.self_draft, f"An {spec.self_draft} self-draft")
        raise DecodeError(f"{what} needs the whole main model on one device, so it cannot be split by a device map; "
                          "drop the device map, draft with --helper SRC, or pick a method that drafts with nothing "
                          "(ar, pld, jacobi, lookahead).")
    if spec.self_draft_layer is not None and device_map != "auto":
        raise DecodeError("An early-exit self-draft cannot run on a model spread by a device map (accelerate's hooks "
                          "run the whole model); drop the device map or draft with a helper model.")
    return device_map



def _check_shared_vocabulary(spec: FamilySpec, main_tok, main_model, helper_tok, helper_model) -> None:
    """A helper's draft ids must mean the same tokens as the main model's: same vocab, same LM head."""
    main_vocab, helper_vocab = main_tok.get_vocab(), helper_tok.get_vocab()
    main_rows = int(main_model.get_output_embeddings().weight.shape[0])
    helper_rows = int(helper_model.get_output_embeddings().weight.shape[0])
    if len(main_vocab) != len(helper_vocab) or main_rows != helper_rows:
        raise DecodeError(
            f"Helper {spec.helper} has a vocabulary of {len(helper_vocab)} tokens (LM head {helper_rows}) "
            f"but main {spec.main} has {len(main_vocab)} (LM head {main_rows}); "
            f"helpers must share the main model's tokenizer."
        )
    if main_vocab != helper_vocab:
        differing = sum(1 for tok, i in helper_vocab.items() if main_vocab.get(tok) != i)
        raise DecodeError(
            f"Helper {spec.helper} maps {differing} of its {len(helper_vocab)} tokens to other ids than "
            f"main {spec.main}; helpers must share the main model's tokenizer."
        )

