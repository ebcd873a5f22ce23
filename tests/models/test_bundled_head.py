"""The trained head shipped for the bundled SmolLM2-135M: it fits the model, it drafts from the
model's own features, and greedy output is the model's own (linear and EAGLE-2's tree)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from decoders.backends.heads import head_draft
from decoders.backends.heads.draft import HeadDraft
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.models.bundled import bundled_head_path
from decoders.models.drafts import TrainedHead
from tests.support.prompts import prompt

MAX_SHIPPED_BYTES = 20 * 10**6


def test_the_shipped_head_fits_the_bundled_model_and_the_package_bound():
    folder = bundled_head_path()
    assert folder is not None, "the bundled model's head is not in the package"
    config = json.loads((folder / "config.json").read_text())
    assert config["tui_decode_format"] == "eagle3"
    # SmolLM2-135M: hidden 576, 9 heads of 64 (3 for keys and values), 49152 tokens, 30 layers
    assert (config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"],
            config["head_dim"], config["vocab_size"]) == (576, 9, 3, 64, 49152)
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 15, 27]
    assert (folder / "model.safetensors").stat().st_size <= MAX_SHIPPED_BYTES
    training = config["tui_decode_training"]
    assert training["train_tokens"] > 0 and len(training["accept_per_depth"]) == training["settings"]["ttt"]


@pytest.fixture(scope="module")
def engine(smollm2):
    draft = head_draft(bundled_head_path(), smollm2.main, smollm2.main_model)
    return Engine(replace(smollm2, helper=draft, helper_source=draft.source, draft=TrainedHead()),
                  pairing="sequential")


@pytest.mark.parametrize("extra", [{"draft_policy": "fixed"}, {"tree_width": 2, "tree_depth": 3}],
                         ids=["linear", "eagle2-tree"])
def test_greedy_output_is_the_models_own_with_the_shipped_head(engine, extra):
    assert isinstance(engine.family.helper, HeadDraft)
    result = engine.run(prompt(241), DecodeParams(method="spec", gamma=3, max_new_tokens=32, **extra))
    assert result.summary.identical is True, result.summary.first_divergence
    assert result.summary.accepted > 0  # the head guesses some of the model's tokens
