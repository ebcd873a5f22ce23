"""A tiny family built in memory (no files): a peaked random Llama, a noisy copy of it as the
helper, on either backend; the prompt the engine tests decode."""

from __future__ import annotations

import torch

from decoders.backends.hf import HFBackend
from decoders.models.backend_choice import make_backend
from decoders.models.family import Family
from tests.support.tiny import perturbed_copy, tiny_llama_config, tiny_tokenizer

VOCAB = 64
# Repetitive words give prompt lookup something to copy.
PROMPT = "w10 w11 w12 w13 w14 w10 w11 w12 w20 w21 w22 w10 w11 w12 w13 w30 w31 w10 w11"


def peaked_model(seed: int = 0, layers: int = 2):
    """Random weights with a large init scale, so that the next-token distribution is peaked and a
    perturbed copy agrees with it often but not always."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    config = tiny_llama_config(vocab=VOCAB, layers=layers)
    config.initializer_range = 0.4
    return LlamaForCausalLM(config).eval()


def tiny_family(fast: bool, helper_noise: float | None = 0.05, stop_ids=frozenset()) -> Family:
    main = peaked_model()
    helper = perturbed_copy(main, helper_noise, seed=1) if helper_noise is not None else None
    wrap = (lambda m: make_backend(m, fast=True)) if fast else HFBackend
    return Family(label="tiny", main=wrap(main), helper=None if helper is None else wrap(helper),
                  tokenizer=tiny_tokenizer(VOCAB), stop_ids=frozenset(stop_ids), device=torch.device("cpu"),
                  dtype=torch.float32, main_source="tiny", helper_source=None if helper is None else "tiny+noise",
                  context_length=128, vocab_size=VOCAB, main_model=main)
