"""A peaked random Llama whose shapes suit the int4 kernel, and the prompt the draft tests use."""

from __future__ import annotations

import torch

from tests.support.tiny import tiny_llama_config

PROMPT = "w10 w11 w12 w13 w14 w10 w11 w12 w20 w21 w22 w10 w11 w12 w13 w30 w31 w10 w11"


def peaked_model(seed: int = 0, layers: int = 2, **config_changes):
    """Random weights with a large init scale: peaked next-token distributions, so that an int4
    copy agrees with the model often but not always. Shapes suit the int4 kernel (K = 32, 64)."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    config = tiny_llama_config(vocab=64, layers=layers)
    config.initializer_range = 0.4
    for key, value in config_changes.items():
        setattr(config, key, value)
    return LlamaForCausalLM(config).eval()
