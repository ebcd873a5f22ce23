"""mypy runs in a background process from the moment the suite is collected, and its test runs
last: on a machine with a spare core it costs the suite almost nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_MYPY: dict[str, subprocess.Popen] = {}


def pytest_collection_modifyitems(session, config, items):
    mypy = [item for item in items if item.name == "test_mypy_passes"]
    if not mypy:
        return
    items[:] = [item for item in items if item not in mypy] + mypy
    _MYPY["proc"] = subprocess.Popen([sys.executable, "-m", "mypy"], cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)


@pytest.fixture
def mypy_result():
    def wait() -> tuple[int, str]:
        proc = _MYPY.get("proc") or subprocess.Popen([sys.executable, "-m", "mypy"], cwd=ROOT,
                                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        output, _ = proc.communicate(timeout=600)
        return proc.returncode, output
    return wait
