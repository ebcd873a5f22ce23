"""End to end on the bundled SmolLM2-135M: greedy methods reproduce the baseline exactly."""

from __future__ import annotations

from dataclasses import replace

import pytest

from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.models.drafts import EarlyExit
from tests.support.prompts import prompt


@pytest.fixture(scope="module")
def engine(smollm2):
    """The bundled model with a self-draft helper (early exit at layer 20, weights shared)."""
    return Engine(replace(smollm2, helper=smollm2.main.early_exit(20), helper_source="early exit @ layer 20",
                          draft=EarlyExit(layer=20)))


@pytest.mark.parametrize("params", [
    DecodeParams(method="pld"),
    DecodeParams(method="pld", draft_policy="fixed"),
    DecodeParams(method="jacobi", block=4),
    DecodeParams(method="spec", gamma=3),
], ids=["pld-adaptive", "pld-fixed", "jacobi", "spec-self-draft"])
def test_summarization_prompt_is_reproduced_exactly(engine, params):
    result = engine.run(prompt(241), params.replace(max_new_tokens=32))
    assert result.summary.identical is True, result.summary.first_divergence
    assert result.method.ids == result.baseline.ids and len(result.method.ids) == 32
    if params.method == "pld":
        assert result.summary.tau > 1  # a summary copies from its article


def test_self_draft_shares_the_main_weights(engine):
    main, helper = engine.family.main, engine.family.helper
    assert helper.n_layers == 20 and main.n_layers == 30
    assert helper.weight_bytes < main.weight_bytes
