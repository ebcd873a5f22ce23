"""The model arguments every command shares (`--family`, `--main`, the drafts, device and dtype)
and the `FamilySpec` they ask for, checked before any model loads."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

import msgspec

from decoders.core.errors import DecodeError
from decoders.models.drafts import (
    MAX_HEAD_VOCAB,
    MAX_LAYER,
    Draft,
    EarlyExit,
    Fastest,
    HelperModel,
    TrainedHead,
    head_of,
)
from decoders.models.families import DEFAULT_FAMILY
from tui_decode.cli.views import ModelFlags

MAX_LAYERS = MAX_LAYER  # an early-exit layer, before the model says how many it has (the largest have ~128)

def add_model_args(p: argparse.ArgumentParser, drafts: bool = True) -> None:
    """The model flags; without ``drafts`` (train-head, whose head is the draft and which trains on
    the torch model's hidden states) none that names a draft or another backend."""
    g = p.add_argument_group("model")
    g.add_argument("--family", help=f"a named family (default {DEFAULT_FAMILY}, the bundled offline SmolLM2-135M); "
                                    "see `tui-decode families`")
    g.add_argument("--main", metavar="SRC", help="main (target) model: hub id, local folder or .gguf file")
    if drafts:
        add_draft_args(g)
    add_device_args(g)


def add_draft_args(g) -> None:
    """The flags that choose a draft (and the backend that runs the models): a decoding run's."""
    g.add_argument("--helper", metavar="SRC", help="helper (draft) model sharing the main model's tokenizer")
    g.add_argument("--self-draft-layer", type=int, metavar="L",
                   help="draft with the main model's first L layers (early exit; shares the weights)")
    g.add_argument("--self-draft", metavar="KIND",
                   help="draft with a weight-only KIND (int4) copy of the main model, built at load time, or with a "
                        "trained head (head: --head FOLDER, or the head shipped for the bundled model)")
    g.add_argument("--head", metavar="FOLDER",
                   help="draft with the trained head in FOLDER or at a hub id org/name (EAGLE-1/2, EAGLE-3 or "
                        "Medusa, as published; the hub cache's copy is used when there is one; implies "
                        "--self-draft head)")
    g.add_argument("--head-vocab", type=int, metavar="N",
                   help="FR-Spec: an EAGLE-1/2 head (which shares the target's LM head) drafts over the N most "
                        "frequent tokens only (the target still verifies over all); ranked by --head-vocab-from")
    g.add_argument("--head-vocab-from", metavar="PATH",
                   help="the ranking for --head-vocab: a file of token ids, most frequent first (FR-Spec's freq_*.pt, "
                        "or a JSON list), or a train-head corpus folder of this model (default for the bundled model: "
                        "the repository's corpus/smollm2-135m-instruct)")
    g.add_argument("--backend", default=None, choices=["torch", "llamacpp"],
                   help="what runs GGUF models: torch (dequantised to float32; default) or llamacpp (llama.cpp's own "
                        "kernels on the weights as stored; needs llama-cpp-python)")


def add_device_args(g) -> None:
    """Where and how the models run: every command's."""
    g.add_argument("--device", default=None, choices=["auto", "cpu", "cuda", "mps"], help="default auto")
    g.add_argument("--dtype", default=None, choices=["auto", "float32", "bfloat16", "float16", "fastest"],
                   help="default auto (the bundled family: fastest): bfloat16 on CUDA (float16 where bf16 is missing), "
                        "float32 on CPU and MPS; float16 on CPU: float16 weights through fbgemm, float32 activations "
                        "(fast Llama backend); fastest: on CPU float32 or float16 weights, whichever is measured "
                        "faster at load")
    g.add_argument("--device-map", default=None, metavar="MAP",
                   help="spread models larger than one GPU over every visible GPU, the CPU and disk with accelerate: "
                        "auto, balanced, sequential, or a .json file of module name -> device; runs on the "
                        "transformers backend")
    g.add_argument("--cuda-graph", default=None, choices=["auto", "on", "off"],
                   help="replay the fast backend's one-token step from a CUDA graph (default auto: on CUDA only)")


def add_remeasure_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--remeasure", action="store_true",
                   help="measure the target dtype and the draft the family chooses on this machine (dtype and "
                        "self-draft 'fastest', the bundled family's) again, and keep the new choice; without it a "
                        "choice kept from an earlier start is reused")


def family_spec(args: ModelFlags):
    """The FamilySpec the model flags ask for (`ModelFlags.of` the parsed command line: train-head's
    have no draft flags, and its view holds them as None)."""
    from decoders.models.families import resolve_family
    from decoders.models.family import FamilySpec

    helper, layer = args.helper, args.self_draft_layer
    for flag, value in (("--family", args.family), ("--main", args.main), ("--helper", helper),
                        ("--self-draft", args.self_draft), ("--head", args.head),
                        ("--device-map", args.device_map)):
        if value is not None and not value.strip():
            raise DecodeError(f"{flag} is empty; give it a value or leave the flag out (see `tui-decode --help`)")
    if args.main and args.family:
        raise DecodeError("give either --family NAME or --main SRC, not both")
    if helper and layer is not None:
        raise DecodeError("give either --helper SRC or --self-draft-layer L, not both")
    # the model's own depth is checked below where its header or config.json says it, else once it loads
    if layer is not None and not 1 <= layer <= MAX_LAYERS:
        raise DecodeError(f"--self-draft-layer must be 1..{MAX_LAYERS} (the draft runs the main model's first L "
                          f"layers, fewer than it has), got {layer}")
    self_draft = args.self_draft
    head = args.head
    if head is not None:
        from pathlib import Path

        from decoders.backends.heads.formats import looks_like_hub_id

        if head != "bundled" and not Path(head).expanduser().is_dir() and not looks_like_hub_id(head):
            raise DecodeError(f"--head {head[:200]!r} is not a folder; give the folder of a trained head "
                              "(config.json and model.safetensors) or a hub id (org/name), or train one with "
                              "`tui-decode train-head`")
        if self_draft not in (None, "head"):
            raise DecodeError(f"give either --self-draft {self_draft} or --head FOLDER, not both")
        self_draft = "head"
    if self_draft is not None:
        from decoders.models.drafts import named_draft

        named_draft(self_draft)  # a kind declared (`decoders.models.drafts`), or one line naming them
        if helper or layer is not None:
            other = "--helper SRC" if helper else "--self-draft-layer L"
            raise DecodeError(f"give either --self-draft {self_draft} or {other}, not both")
    if args.main:
        spec = FamilySpec(name="custom", main=args.main, device="auto", dtype="auto", label=None)
    else:
        spec = resolve_family(args.family or DEFAULT_FAMILY)
    changes: dict[str, Any] = {}
    draft = asked_draft(helper, layer, self_draft, head, spec.draft)
    if draft is not spec.draft:
        changes["draft"] = draft
    head_vocab, vocab_from = args.head_vocab, args.head_vocab_from
    if head_vocab is not None:
        if not 1 <= head_vocab <= MAX_HEAD_VOCAB:
            raise DecodeError(f"--head-vocab must be 1..{MAX_HEAD_VOCAB} (tokens the head drafts over; FR-Spec uses "
                              f"8192-32768), got {head_vocab}")
    if vocab_from is not None:
        if not vocab_from.strip():
            raise DecodeError("--head-vocab-from is empty; give a ranking file or a corpus folder, or leave it out")
        if head_vocab is None:
            raise DecodeError("--head-vocab-from ranks the tokens for --head-vocab N; give --head-vocab too")
        from decoders.backends.heads.fr_spec import locate

        locate(vocab_from)  # before the model loads; its ids are checked against the model after
    backend = args.backend
    if backend:
        changes["backend"] = backend
        if backend == "llamacpp":  # the family's own int4 or head draft and its "fastest" dtype are torch's
            if self_draft is None and layer is None and not helper and not isinstance(draft, HelperModel):
                changes["draft"] = None
            if not args.dtype:
                changes["dtype"] = "auto"
    if args.device:
        changes["device"] = args.device
    if args.dtype:
        changes["dtype"] = args.dtype
    if args.device_map:
        changes["device_map"] = args.device_map
    if args.cuda_graph:
        changes["cuda_graph"] = args.cuda_graph
    if changes:
        spec = replace(spec, **changes)
    if args.remeasure:
        if "fastest" not in (spec.dtype, spec.self_draft):
            raise DecodeError("--remeasure measures again the dtype and draft a family chooses at load (dtype or "
                              "self-draft 'fastest', as the bundled family has), and this one fixes both; leave "
                              "--remeasure out")
        spec = replace(spec, remeasure=True)
    if head_vocab is not None:
        trained = head_of(spec.draft)
        if trained is None:  # it would go unused
            what = (f"the helper {spec.helper[:200]}" if spec.helper else
                    f"the first {spec.self_draft_layer} layers" if spec.self_draft_layer is not None else
                    f"the {spec.self_draft} self-draft" if spec.self_draft else "no draft")
            raise DecodeError(f"--head-vocab sets how many tokens a trained head drafts over, and this run drafts "
                              f"with {what}; add --self-draft head (or --head FOLDER), or leave --head-vocab out")
        trained = msgspec.structs.replace(trained, vocab=head_vocab, vocab_from=vocab_from)
        draft = trained if isinstance(spec.draft, TrainedHead) else Fastest(head=trained)
        spec = replace(spec, draft=draft)
    if layer is not None:  # at once, not after a load of many seconds
        from decoders.models.layer_count import check_draft_layer

        check_draft_layer(spec, "--self-draft-layer")
    return spec


def asked_draft(helper: str | None, layer: int | None, self_draft: str | None, head: str | None,
                family: Draft | None) -> Draft | None:
    """The draft the flags ask for (checked: one of them at most), else the family's own."""
    from decoders.models.drafts import named_draft

    if helper:
        return HelperModel(source=helper)
    if layer is not None:
        return EarlyExit(layer=layer)
    if self_draft is not None:
        draft = named_draft(self_draft)
        if type(family) is type(draft):  # the family's own, with what its file says of it (a head's vocabulary)
            draft = family
        if head is not None and isinstance(draft, TrainedHead):
            return msgspec.structs.replace(draft, folder=head)
        return draft
    if head is not None:
        return TrainedHead(folder=head)
    return family
