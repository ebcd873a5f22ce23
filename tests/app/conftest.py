"""Fixtures of the app tests: a tiny Llama family saved to disk once per module, and a loader
that hands it to the app as `load_family` would."""

from __future__ import annotations

import pytest

from decoders.core.errors import DecodeError
from decoders.models.family import FamilySpec, load_family
from tests.support.tiny import save_tiny_model


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def tiny_spec(tmp_path_factory) -> FamilySpec:
    folder = save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", vocab=64, layers=3)
    return FamilySpec(name="tiny", main=str(folder), device="cpu", dtype="float32", label="tiny llama")


@pytest.fixture(scope="module")
def tiny_family(tiny_spec):
    return load_family(tiny_spec)


@pytest.fixture
def loader(tiny_family):
    """Loads the tiny family; any other family fails the way an unreachable hub does."""
    calls: list[str] = []

    def load(spec: FamilySpec, progress):
        calls.append(spec.name)
        progress("loading", 0.5)
        if spec.name != "tiny":
            raise DecodeError(f"The Hugging Face hub could not be reached to fetch {spec.main}")
        return tiny_family

    load.calls = calls
    return load
