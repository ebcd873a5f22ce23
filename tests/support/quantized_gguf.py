"""A quantised copy of the bundled GGUF (llama.cpp's own ``llama_model_quantize``, the Q4_1 file
requantised to Q4_0 in about two seconds): a GGUF helper that shares the bundled model's
vocabulary but not all its greedy choices, so a llama.cpp draft made of it is accepted in part and
rolled back in part (the bundled file itself as its own helper would be accepted whole)."""

from __future__ import annotations

import ctypes
from pathlib import Path

#: llama.cpp's ``LLAMA_FTYPE_MOSTLY_Q4_0``.
Q4_0 = 2


def quantized_copy(source: Path, target: Path, ftype: int = Q4_0) -> Path:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True  # the source is quantised already
    params.nthread = 1
    code = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    if code != 0:
        raise RuntimeError(f"llama_model_quantize returned {code} for {source}")
    return target
