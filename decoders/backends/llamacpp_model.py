"""llama-cpp-python, loaded when a llama.cpp backend is first made (`load_llama_cpp`: missing, too
old or broken is one line saying how to install it), and a GGUF file loaded by it (`LlamaModel`),
its weights as stored, shared by every context on it (`decoders.backends.llamacpp.LlamaCppBackend`).

llama_cpp is imported when a model is loaded, never at module import.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

from decoders.core.errors import DecodeError

#: Oldest llama-cpp-python with the memory API (``llama_memory_seq_*``) and ``kv_unified``.
MIN_VERSION = (0, 3, 16)
INSTALL_HINT = ("install it with `pip install llama-cpp-python==0.3.36` (it builds from source: cmake and a C++ "
                "compiler are needed; scripts/setup.sh does it), or use --backend torch")


def load_llama_cpp():
    """The llama_cpp module, or DecodeError saying how to install it (missing, too old, broken)."""
    try:
        import llama_cpp
    except ModuleNotFoundError:
        raise DecodeError(f"The llama.cpp backend needs llama-cpp-python, which is not installed; {INSTALL_HINT}.") \
            from None
    except (ImportError, OSError) as err:  # a wheel built for another CPU or a missing libllama
        raise DecodeError(f"llama-cpp-python is installed but does not load ({str(err).splitlines()[0][:200]}); "
                          f"reinstall it: {INSTALL_HINT}.") from None
    version = tuple(int(p) for p in llama_cpp.__version__.split(".")[:3] if p.isdigit())
    if version < MIN_VERSION or not hasattr(llama_cpp, "llama_memory_seq_rm"):
        raise DecodeError(f"llama-cpp-python {llama_cpp.__version__} is too old for the llama.cpp backend (it needs "
                          f"{'.'.join(map(str, MIN_VERSION))} or newer); {INSTALL_HINT}.")
    return llama_cpp


def version() -> str | None:
    """llama-cpp-python's version, or None where it is not installed (nothing is loaded)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("llama-cpp-python")
    except PackageNotFoundError:
        return None


_QUIET: Any = None  # the log callback that silences llama.cpp (kept alive: ctypes holds no reference)


def _silence(llama_cpp) -> None:
    global _QUIET
    if _QUIET is None:
        @llama_cpp.llama_log_callback
        def quiet(level, text, user_data):  # noqa: ARG001
            return None

        _QUIET = quiet
        llama_cpp.llama_log_set(_QUIET, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()


class LlamaModel:
    """A GGUF file loaded by llama.cpp (its weights, as stored), shared by every context on it."""

    def __init__(self, path: Path):
        llama_cpp = load_llama_cpp()
        _silence(llama_cpp)
        self.lib = llama_cpp
        self.path = Path(path)
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0
        params.use_mmap = True
        model = llama_cpp.llama_model_load_from_file(os.fsencode(self.path), params)
        if not model:
            raise DecodeError(f"llama.cpp cannot load {self.path}: its architecture or tensors are not ones this "
                              f"llama.cpp (llama-cpp-python {llama_cpp.__version__}) knows; use --backend torch, "
                              "or a newer llama-cpp-python")
        self.model = model
        self.vocab = llama_cpp.llama_model_get_vocab(model)
        self.vocab_size = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.n_layers = int(llama_cpp.llama_model_n_layer(model))
        self.context_trained = int(llama_cpp.llama_model_n_ctx_train(model))
        self.weight_bytes = int(llama_cpp.llama_model_size(model))
        buf = ctypes.create_string_buffer(256)
        llama_cpp.llama_model_desc(model, buf, len(buf))
        desc = buf.value.decode("utf-8", "replace")
        self.description = desc.split()[-1] if desc else None  # "llama ?B Q4_1 - Medium" -> the type
        self.n_swa = int(llama_cpp.llama_model_n_swa(model)) if hasattr(llama_cpp, "llama_model_n_swa") else 0

    def stop_ids(self) -> set[int]:
        lib, vocab = self.lib, self.vocab
        return {int(i) for i in (lib.llama_vocab_eos(vocab), lib.llama_vocab_eot(vocab)) if int(i) >= 0}

    def __del__(self):
        model = getattr(self, "model", None)
        if model:
            try:
                self.lib.llama_model_free(model)
            except Exception:  # interpreter shutdown: the library may be gone
                pass
            self.model = None

