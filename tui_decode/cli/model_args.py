"""The model arguments every command shares (`--family`, `--main`, the drafts, device and dtype)
and the `FamilySpec` they ask for, checked before any model loads."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from decoders.core.errors import DecodeError
from decoders.models.families import DEFAULT_FAMILY

MAX_LAYERS = 1024  # an early-exit layer, before the model says how many it has (the largest have ~128)
MAX_HEAD_VOCAB = 1 << 20  # FR-Spec's subset; the model's own vocabulary bounds it again once it loads

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


def family_spec(args: argparse.Namespace):
    """The FamilySpec the arguments ask for (train-head's have no draft flags)."""
    from decoders.models.families import resolve_family
    from decoders.models.family import FamilySpec

    helper, layer = getattr(args, "helper", None), getattr(args, "self_draft_layer", None)
    for flag, value in (("--family", args.family), ("--main", args.main), ("--helper", helper),
                        ("--self-draft", getattr(args, "self_draft", None)), ("--head", getattr(args, "head", None)),
                        ("--device-map", getattr(args, "device_map", None))):
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
    self_draft = getattr(args, "self_draft", None)
    head = getattr(args, "head", None)
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
        from decoders.models.family import SELF_DRAFT_KINDS

        if self_draft not in SELF_DRAFT_KINDS:
            raise DecodeError(f"unknown --self-draft kind {self_draft!r}; choose one of {', '.join(SELF_DRAFT_KINDS)}")
        if helper or layer is not None:
            other = "--helper SRC" if helper else "--self-draft-layer L"
            raise DecodeError(f"give either --self-draft {self_draft} or {other}, not both")
    if args.main:
        spec = FamilySpec(name="custom", main=args.main, helper=None, self_draft_layer=None,
                          device="auto", dtype="auto", label=None)
    else:
        spec = resolve_family(args.family or DEFAULT_FAMILY)
    changes: dict[str, Any] = {}
    if helper:
        changes.update(helper=helper, self_draft_layer=None, self_draft=None)
    if layer is not None:
        changes.update(self_draft_layer=layer, helper=None, self_draft=None)
    if self_draft is not None:
        changes.update(self_draft=self_draft, helper=None, self_draft_layer=None)
    if head is not None:
        changes["head"] = head
    head_vocab, vocab_from = getattr(args, "head_vocab", None), getattr(args, "head_vocab_from", None)
    if head_vocab is not None:
        if not 1 <= head_vocab <= MAX_HEAD_VOCAB:
            raise DecodeError(f"--head-vocab must be 1..{MAX_HEAD_VOCAB} (tokens the head drafts over; FR-Spec uses "
                              f"8192-32768), got {head_vocab}")
        changes["head_vocab"] = head_vocab
    if vocab_from is not None:
        if not vocab_from.strip():
            raise DecodeError("--head-vocab-from is empty; give a ranking file or a corpus folder, or leave it out")
        if head_vocab is None:
            raise DecodeError("--head-vocab-from ranks the tokens for --head-vocab N; give --head-vocab too")
        from decoders.backends.heads.fr_spec import locate

        locate(vocab_from)  # before the model loads; its ids are checked against the model after
        changes["head_vocab_from"] = vocab_from
    backend = getattr(args, "backend", None)
    if backend:
        changes["backend"] = backend
        if backend == "llamacpp":  # the family's own int4 or head draft and its "fastest" dtype are torch's
            if self_draft is None and layer is None and not helper:
                changes.update(self_draft=None, head=None)
            if not args.dtype:
                changes["dtype"] = "auto"
    if args.device:
        changes["device"] = args.device
    if args.dtype:
        changes["dtype"] = args.dtype
    if getattr(args, "device_map", None):
        changes["device_map"] = args.device_map
    if getattr(args, "cuda_graph", None):
        changes["cuda_graph"] = args.cuda_graph
    if changes:
        spec = replace(spec, **changes)
    if getattr(args, "remeasure", False):
        if "fastest" not in (spec.dtype, spec.self_draft):
            raise DecodeError("--remeasure measures again the dtype and draft a family chooses at load (dtype or "
                              "self-draft 'fastest', as the bundled family has), and this one fixes both; leave "
                              "--remeasure out")
        spec = replace(spec, remeasure=True)
    if head_vocab is not None and spec.self_draft not in ("head", "fastest"):  # it would go unused
        draft = (f"the helper {spec.helper[:200]}" if spec.helper else
                 f"the first {spec.self_draft_layer} layers" if spec.self_draft_layer is not None else
                 f"the {spec.self_draft} self-draft" if spec.self_draft else "no draft")
        raise DecodeError(f"--head-vocab sets how many tokens a trained head drafts over, and this run drafts with "
                          f"{draft}; add --self-draft head (or --head FOLDER), or leave --head-vocab out")
    if layer is not None:  # at once, not after a load of many seconds
        from decoders.models.layer_count import check_draft_layer

        check_draft_layer(spec, "--self-draft-layer")
    return spec
