"""Where scripts/setup.sh could build llama-cpp-python (cmake and a C++ compiler are here), it did:
the llama.cpp backend's tests must not pass by being skipped."""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("c++")) or bool(os.environ.get("TUI_DECODE_NO_LLAMACPP")),
                    reason="no compiler here: setup.sh leaves the llama.cpp backend out, and says so")
def test_llama_cpp_python_is_installed_where_it_can_be_built():
    from decoders.backends.llamacpp_model import load_llama_cpp

    assert load_llama_cpp().__version__ == "0.3.36"
