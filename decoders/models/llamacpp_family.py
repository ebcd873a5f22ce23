"""A family run by llama.cpp (`--backend llamacpp`): GGUF files loaded as they are stored, with the
tokenizer transformers reads from the same file (the ids both sides use are the file's own).

Nothing is dequantised: the tokenizer comes from the converted copy when one is cached (0.4 s),
else from the GGUF's own metadata (about 9 s on the bundled file, mostly transformers' import).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from decoders.core.errors import DecodeError
from decoders.core.events import LoadProgress

if TYPE_CHECKING:
    from decoders.models.family import FamilySpec

BACKENDS = ("torch", "llamacpp")


def check_backend(spec: FamilySpec) -> None:
    """What a llama.cpp family cannot be, in one line each, before anything loads."""
    backend = spec.backend
    if backend not in BACKENDS:
        raise DecodeError(f"Unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}.")
    if backend != "llamacpp":
        return
    from decoders.models.sources import classify_source

    for role, source in (("main", spec.main), ("helper", spec.helper)):
        if source:
            kind, _ = classify_source(source)
            if kind not in ("bundled", "gguf"):
                raise DecodeError(f"--backend llamacpp runs GGUF files, and the {role} model {source[:200]} is a "
                                  f"{'model folder' if kind == 'folder' else 'hub id'}; give a .gguf file (or "
                                  "\"bundled\"), or use --backend torch.")
    if spec.draft is not None and spec.helper is None:
        raise DecodeError(no_torch_draft(spec.draft))
    if spec.device not in ("auto", "cpu"):
        raise DecodeError(f"The llama.cpp backend here runs on the CPU (this llama-cpp-python was built without GPU "
                          f"support), not on {spec.device}; use --device cpu, or --backend torch.")
    if spec.dtype == "fastest":
        raise DecodeError("--dtype fastest measures torch's float32 against float16 weights; the llama.cpp backend "
                          "runs the weights as the GGUF file stores them, so there is nothing to choose: leave --dtype "
                          "out, or use --backend torch.")
    if spec.dtype != "auto":
        raise DecodeError(f"The llama.cpp backend runs the weights as the GGUF file stores them, so --dtype "
                          f"{spec.dtype} cannot apply; leave --dtype out, or use --backend torch.")
    if spec.device_map is not None:
        raise DecodeError("A device map spreads a torch model; the llama.cpp backend cannot take one. Drop "
                          "--device-map, or use --backend torch.")


def no_torch_draft(draft) -> str:
    """Why llama.cpp cannot run ``draft`` (any draft built from the torch model), in one line."""
    from decoders.models.drafts import EarlyExit, TrainedHead

    if isinstance(draft, EarlyExit):
        return ("An early-exit draft needs the torch backend (llama.cpp runs the whole model); use --backend torch, "
                "or draft with a GGUF helper (--helper FILE.gguf).")
    what = "A trained head reads the target's hidden states" if isinstance(draft, TrainedHead) else \
        f"An {draft.kind} self-draft is packed from the torch model's weights"
    return (f"{what}, which the llama.cpp backend does not expose; use --backend torch, or draft with a GGUF helper "
            "(--helper FILE.gguf).")


def gguf_location(source: str) -> Path:
    from decoders.models import gguf_cache
    from decoders.models.sources import classify_source

    kind, location = classify_source(source)
    if kind == "bundled":
        from decoders.models.bundled import bundled_gguf_path

        location = bundled_gguf_path()
    assert location is not None
    return gguf_cache.check_gguf_file(location).resolve()


def gguf_tokenizer(path: Path):
    """The tokenizer of a GGUF file: the cached converted copy's, or built from the file's metadata."""
    from transformers import AutoTokenizer

    from decoders.models import gguf_cache
    from decoders.models.hf_progress import quiet_progress_bars

    with quiet_progress_bars():
        if gguf_cache.is_converted(path):
            try:
                return AutoTokenizer.from_pretrained(str(gguf_cache.converted_folder(path)))
            except Exception:  # a damaged copy: the file itself is the truth
                pass
        try:
            return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        except Exception as err:
            first = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
            raise DecodeError(f"Cannot read the tokenizer of {path}: {first}; use --backend torch, or another "
                              ".gguf file") from None


def load_llamacpp_family(spec, report: LoadProgress):
    """The `Family` of ``spec`` on llama.cpp backends (main, and a GGUF helper when it names one)."""
    import torch

    from decoders.backends.llamacpp import LlamaCppBackend
    from decoders.backends.llamacpp_model import load_llama_cpp
    from decoders.models.backend_choice import warm_up
    from decoders.models.family import Family, context_length_of, stop_token_ids
    from decoders.models.sources import default_label

    check_backend(spec)
    load_llama_cpp()  # missing or too old: said before any file is read
    main_path = gguf_location(spec.main)
    helper_path = gguf_location(spec.helper) if spec.helper else None
    report(f"Loading main model {main_path.name} with llama.cpp (as stored, nothing dequantised)", 0.05)
    main_model = _load_model(main_path)
    report("Reading the tokenizer from the GGUF file", 0.3)
    tokenizer = gguf_tokenizer(main_path)
    positions = context_length_of(main_model.context_trained or 2048, tokenizer)
    main = LlamaCppBackend(main_model, max_positions=positions)
    helper = None
    if helper_path is not None:
        report(f"Loading helper model {helper_path.name} with llama.cpp", 0.6)
        helper_model = _load_model(helper_path) if helper_path != main_path else main_model
        if helper_model.vocab_size != main_model.vocab_size:
            raise DecodeError(f"Helper {spec.helper} has a vocabulary of {helper_model.vocab_size} tokens but main "
                              f"{spec.main} has {main_model.vocab_size}; helpers must share the main model's "
                              "tokenizer.")
        if helper_path != main_path:
            helper_tokenizer = gguf_tokenizer(helper_path)
            if helper_tokenizer.get_vocab() != tokenizer.get_vocab():
                raise DecodeError(f"Helper {spec.helper} maps its tokens to other ids than main {spec.main}; helpers "
                                  "must share the main model's tokenizer.")
        helper = LlamaCppBackend(helper_model, max_positions=main.max_positions)
    report("Warming up (a first forward of each model)", 0.95)
    for backend in (main, helper):
        if backend is not None:
            warm_up(backend)
    report("Models ready", 1.0)
    stops = stop_token_ids(None, tokenizer) | main_model.stop_ids()
    return Family(
        label=spec.label or f"{default_label(spec.main)} (llama.cpp)",
        main=main,
        helper=helper,
        tokenizer=tokenizer,
        stop_ids=frozenset(stops),
        device=torch.device("cpu"),
        dtype=torch.float32,
        main_source="bundled" if spec.main == "bundled" else str(main_path),
        helper_source=(("bundled" if spec.helper == "bundled" else str(helper_path)) if helper_path else None),
        context_length=main.max_positions,
        vocab_size=main.vocab_size,
        backend="llamacpp",
        stored_as=main_model.description,
        draft=spec.draft if helper_path else None,
    )


def _load_model(path: Path):
    """llama.cpp's model of ``path``; a file it refuses that is cut short or damaged says so (llama.cpp
    only says it failed, which alone reads as an architecture it does not know)."""
    from decoders.backends.llamacpp_model import LlamaModel

    try:
        return LlamaModel(path)
    except DecodeError:
        from decoders.models.gguf_check import check_gguf_intact

        check_gguf_intact(path)
        raise
