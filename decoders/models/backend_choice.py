"""Which backend runs a loaded model, on which device and dtype, and the quantized self-draft
built from it. torch is imported inside the functions that need it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from decoders.core.errors import DecodeError

if TYPE_CHECKING:
    import torch

    from decoders.backends.hf import Backend

Device = Literal["auto", "cpu", "cuda", "mps"]
# "fastest": on CPU float32 or float16 weights, measured at load (`decoders.models.dtype_choice`)
Dtype = Literal["auto", "float32", "bfloat16", "float16", "fastest"]
DEVICES: tuple[str, ...] = get_args(Device)
DTYPES: tuple[str, ...] = get_args(Dtype)


def make_backend(model, fast: bool = True, max_positions: int | None = None, cuda_graph: str = "auto",
                 fp16_weights: bool = False) -> Backend:
    """The fastest backend that can run ``model``: `LlamaBackend` for Llama/Qwen2 shapes, else `HFBackend`.

    ``max_positions`` defaults to the model config's ``max_position_embeddings``. ``cuda_graph``
    ("auto": on CUDA only, "on", "off") replays the fast backend's one-token step from a CUDA graph.
    ``fp16_weights``: a float32 CPU model with float16 weights (`decoders.backends.fp16_cpu`), or DecodeError.
    """
    from decoders.backends.hf import HFBackend

    if fp16_weights:
        from decoders.backends.fp16_cpu import backend_for

        return backend_for(model, max_positions)

    if fast:
        try:
            from decoders.backends.llama_fast import LlamaBackend, supports
        except ModuleNotFoundError as err:
            if err.name not in ("decoders.backends.llama_fast", "decoders"):
                raise  # llama_fast exists but imports something missing: a real bug
        else:
            if supports(model):
                from decoders.backends.hf import input_device
                from decoders.backends.static_step import mode_for

                return LlamaBackend.from_hf(model, max_positions=max_positions,
                                            step_mode=mode_for(cuda_graph, input_device(model)))
    return HFBackend(model, max_positions=max_positions)


def resolve_device(name: str) -> torch.device:
    """auto: CUDA if present, else Apple MPS, else CPU. An explicit device must be available."""
    import torch

    if name not in DEVICES:
        raise DecodeError(f"Unknown device {name!r}; choose one of {', '.join(DEVICES)}.")
    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if cuda else "mps" if mps else "cpu")
    if name == "cuda" and not cuda:
        raise DecodeError("Device cuda was requested but torch sees no CUDA GPU; use --device cpu or auto.")
    if name == "mps" and not mps:
        raise DecodeError("Device mps was requested but torch sees no Apple MPS device; use --device cpu or auto.")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """auto: float32 on CPU/MPS; bfloat16 on CUDA where supported, else float16. float16 on CPU
    means float16 weights on a float32 model (`load_family`, `decoders.backends.fp16_cpu`);
    fastest is auto off the CPU, and on it float32 until `load_family` has measured both."""
    import torch

    if name not in DTYPES:
        raise DecodeError(f"Unknown dtype {name!r}; choose one of {', '.join(DTYPES)}.")
    if name == "fastest" and device.type == "cpu":  # float32 to load; the family may switch to float16 weights
        return torch.float32
    if name in ("auto", "fastest"):
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, name)


def quantized_draft(main_backend, main_model, kind: str) -> Backend:
    """A weight-only ``kind`` copy of the main model as its draft (see `decoders.backends.quantized`).

    A main model the packed kernels cannot take (shape, device, architecture) is a DecodeError
    that says which matrix or what is missing; so is a draft larger than the free memory
    (`decoders.models.memory.available_memory`), checked before anything is built.
    """
    from decoders.backends.llama_fast import LlamaBackend
    from decoders.backends.quantized import QuantizedLlamaBackend, draft_bytes, unsupported_reason
    from decoders.models.memory import available_memory, check_memory

    if main_model is None:
        raise DecodeError(f"Cannot build an {kind} self-draft: this family keeps no model module to quantize.")
    reason = unsupported_reason(main_model, kind, device=main_backend.device)
    if reason is not None:
        raise DecodeError(f"Cannot build an {kind} self-draft of this model: {reason}.")
    device = main_backend.device
    check_memory(sum(draft_bytes(main_model)),
                 f"an {kind} self-draft of this model (its packed weights, scales and room to pack them)",
                 available_memory(device), "in main memory" if device.type != "cuda" else f"on {device}",
                 "close other programs, or draft with an early-exit layer or a helper model instead")
    target = main_backend if isinstance(main_backend, LlamaBackend) else LlamaBackend.from_hf(main_model)
    try:
        return QuantizedLlamaBackend.from_target(target, main_model, kind)
    except (ValueError, RuntimeError) as err:
        raise DecodeError(f"Cannot build an {kind} self-draft of this model: {err}.") from err


def head_folder(head: str | None, main: str, missing_ok: bool = False) -> str | None:
    """The folder of the trained head a family drafts with: ``head`` as given, or the head shipped
    for the bundled model when the main model is the bundled one (None: no head)."""
    if head and head != "bundled":
        return head
    from decoders.models.bundled import bundled_head_path

    if head == "bundled" or main == "bundled":
        path = bundled_head_path()
        if path is not None:
            return str(path)
        if head == "bundled" and not missing_ok:
            raise DecodeError("This install ships no trained head for the bundled model; train one with "
                              "`tui-decode train-head` and give --head FOLDER.")
    if missing_ok:
        return None
    raise DecodeError("A head draft needs a trained head: give --head FOLDER (an EAGLE-1/2, EAGLE-3 or Medusa "
                      "head for this main model), or train one with `tui-decode train-head`.")


def trained_head(main_backend, main_model, folder: str | None, vocab: tuple[int, str] | None = None):
    """The draft backend of the trained head in ``folder`` (`decoders.backends.heads`); ``vocab``:
    FR-Spec's (size, ranking source) for a head sharing the target's LM head."""
    if folder is None:
        head_folder(None, "", missing_ok=False)
    if main_model is None:
        raise DecodeError("A trained head needs the main model's embedding and LM head; this family keeps no model "
                          "module.")
    from decoders.backends.heads import head_draft

    return head_draft(folder, main_backend, main_model, vocab)


def warm_up(backend: Backend) -> None:
    """One short forward right after loading, then an empty cache.

    The first forward after a load pays for first use (weights paged in from the memory-mapped
    safetensors, kernels chosen): 3-4 s against 0.1 s afterwards for the bundled model. Left in
    the first timed run, it inflates that baseline and every speedup measured against it.
    """
    import torch

    from decoders.backends.heads.medusa import MedusaDraft

    if isinstance(backend, MedusaDraft):  # its heads read the target's verified features: nothing to run alone,
        return  # and the target it reads (warmed on its own) holds every weight but the heads' small ones
    backend.forward(torch.tensor([1, 2, 3, 4], device=backend.device) % backend.vocab_size, keep=1)
    backend.forward(torch.tensor([5], device=backend.device) % backend.vocab_size, keep=1)  # a CUDA graph's capture
    backend.reset()


def head_vocab_of(head, main: str) -> tuple[int, str] | None:
    """FR-Spec's (size, ranking source) a trained head (`decoders.models.drafts.TrainedHead`) asks
    for, or None; the bundled model ranks by the repository's corpus of its answers unless told otherwise."""
    if head.vocab is None:
        return None
    source = head.vocab_from
    if source is None:
        from decoders.models.bundled import bundled_corpus

        source = bundled_corpus() if main == "bundled" else None
        if source is None:
            raise DecodeError(f"--head-vocab {head.vocab} needs a ranking of this model's tokens; give "
                              "--head-vocab-from FILE (FR-Spec's freq_*.pt, or a JSON list of ids) or a train-head "
                              "corpus folder of this model.")
    return head.vocab, source
