"""The GPU check, dry-run on CPU at tiny sizes as a lent GPU would run it for real, so that the
minutes a GPU is lent for are not spent on a script that has rotted (issue 40: its first step
named a test file that had moved, and its early-exit family never loaded, which skipped the
identity runs and five bench checks on it).

Two halves: `scripts/gpu_check.sh` itself against a stand-in python that logs each call (every
path it hands pytest exists, the device check gets its flags), and `scripts/device_check.py
--device cpu --dry` run whole, every check passing, none skipped.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$GPU_CHECK_LOG"
"""


def test_gpu_check_sh_hands_pytest_files_that_exist_and_the_device_check_its_flags(tmp_path):
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    log = tmp_path / "log"
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--device", "cpu", "--dry"], cwd=ROOT,
                          env={**os.environ, "PYTHON": str(python), "GPU_CHECK_LOG": str(log)}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = log.read_text().splitlines()
    pytest_calls = [call.split() for call in calls if call.startswith("-m pytest ")]
    assert pytest_calls, calls
    for call in pytest_calls:
        paths = [arg for arg in call[2:] if not arg.startswith("-") and arg != "no:cacheprovider"]
        assert paths and all((ROOT / path.split("::")[0]).exists() for path in paths), call
    assert "scripts/device_check.py --device cpu --dry" in calls


#: Each part of the check, as its table names it: (section | check) patterns that must each pass.
EXPECTED = [
    r"engine float32 step=off \| logits vs transformers",
    r"engine bfloat16 step=eager \| spec identical to AR",
    r"identity .* \(early exit @ layer 8\) \| spec",
    r"identity .* \(int4 self-draft\) \| lookahead",
    r"bench \| transformers generate\(\) greedy",
    *[rf"bench \| {row} graph=off" for row in ("ar", "spec early-exit", "spec int4", "pld", "jacobi")],
]


@pytest.mark.slow  # every part of the check: tiny engines in two dtypes, the bundled model with two drafts
@pytest.mark.model  # loads the bundled SmolLM2-135M
def test_the_device_checks_dry_run_passes_every_part_and_skips_none(capsys):
    spec = importlib.util.spec_from_file_location("device_check", ROOT / "scripts" / "device_check.py")
    assert spec is not None and spec.loader is not None
    device_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(device_check)
    code = device_check.main(["--device", "cpu", "--dry"])
    table = capsys.readouterr().out
    table = table[table.rindex("\ncheck "):]  # the table printed at the end
    assert code == 0, table
    assert not re.search(r" (--|FAIL)( |$)", table, re.MULTILINE), table  # a check skipped or failed
    assert re.search(r"\n\d+ checks, 0 failed,", table), table
    for pattern in EXPECTED:
        assert re.search(rf"\n{pattern}\s+ok\b", table), f"{pattern} did not pass:\n{table}"
