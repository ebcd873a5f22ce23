"""Fixtures of the engine tests: an engine on the tiny in-memory family, on each backend."""

from __future__ import annotations

import pytest

from decoders.engine import Engine
from tests.support.engine import tiny_family


@pytest.fixture(scope="module", params=[False, True], ids=["hf-backend", "fast-backend"])
def engine(request):
    """Paired sequentially: the tests that take it are about what a method emits, not about how
    its baseline is timed (test_pairing.py), and a baseline decoded once per prompt and budget
    costs half of one decoded beside every run."""
    return Engine(tiny_family(fast=request.param), pairing="sequential")


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs torch on one CPU thread (see tests/conftest.py)."""
