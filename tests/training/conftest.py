"""Fixtures of the training tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread(one_torch_thread):
    """Every test here runs torch on one CPU thread (see tests/conftest.py)."""
