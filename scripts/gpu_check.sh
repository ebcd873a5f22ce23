#!/usr/bin/env bash
# The GPU check (issue 13), one prepared script for a CUDA machine, under 8 minutes:
#   1. the device-path tests (CPU emulations of CUDA/MPS behaviour) with pytest;
#   2. engine checks on CUDA in float32 and bfloat16, with and without the CUDA-graph step:
#      logits against transformers, every method identical to autoregressive, host syncs per
#      iteration counted by torch's CUDA sync debug mode, seeded sampling reproducible;
#   3. identity runs of every method on the bundled SmolLM2-135M (early-exit and int4 drafts);
#   4. a short bench (AR, spec with each self-draft, PLD, Jacobi; 6 prompts, 64 tokens, CUDA
#      graph off and on) against transformers generate();
# and prints one table. Not yet run on a GPU.
#
#   scripts/gpu_check.sh                  # on a CUDA machine
#   scripts/gpu_check.sh --device cpu --dry   # prove every part parses and runs, tiny sizes, on CPU
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
DEVICE=cuda
DRY=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE="${2:?--device needs cuda or cpu}"; shift 2 ;;
    --dry) DRY=(--dry); shift ;;
    -h|--help) sed -n 2,14p "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (use --device cuda|cpu and --dry)" >&2; exit 2 ;;
  esac
done
if [ "$DEVICE" = cuda ] && ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check: torch $("$PY" -c 'import torch; print(torch.__version__)') sees no CUDA GPU here; run it on a CUDA machine with a CUDA build of torch (scripts/setup.sh installs the CPU one), or dry-run with --device cpu --dry" >&2
  exit 2
fi
start=$SECONDS
echo "== device-path tests (pytest)"
timeout 180 "$PY" -m pytest tests/backends/test_device_paths.py -q -x -p no:cacheprovider
echo "== engine checks, identity runs, bench on $DEVICE"
# the 8-minute budget holds on a CUDA machine; a dry run on a small CPU may take longer
limit=$((470 - (SECONDS - start))); [ ${#DRY[@]} -gt 0 ] && limit=1500
timeout "$limit" "$PY" scripts/device_check.py --device "$DEVICE" ${DRY[@]+"${DRY[@]}"}
echo "gpu_check: done in $((SECONDS - start)) s"
