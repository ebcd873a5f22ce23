"""Tiny random Llama models and tokenizers for tests that must not load a real model.

A tiny model saved with `save_tiny_model` is a complete transformers model folder (config,
safetensors, tokenizer), so it exercises the same loading path as a real local model.
"""

from __future__ import annotations

import copy
from pathlib import Path

TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }} {{ message['content'] }}<|im_end|> "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant {% endif %}"
)
SPECIAL_TOKENS = ["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tiny_llama_config(vocab: int = 64, layers: int = 2, max_positions: int = 128):
    """A Llama config small enough to build and run in milliseconds."""
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=vocab,
        max_position_embeddings=max_positions,
        bos_token_id=1,
        eos_token_id=3,
        pad_token_id=0,
        tie_word_embeddings=False,
    )


def tiny_model(vocab: int = 64, layers: int = 2, seed: int = 0, max_positions: int = 128):
    """A random `LlamaForCausalLM` in eval mode, reproducible from ``seed``."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config(vocab=vocab, layers=layers, max_positions=max_positions)).eval()


def tiny_tokenizer(vocab_size: int = 64, chat_template: bool = True):
    """A word-level tokenizer over ``vocab_size`` ids: the special tokens, then "w4", "w5", ...

    Text is split on whitespace; unknown words map to <unk>. Ids line up with a tiny model of
    the same vocabulary size, so any id the model produces decodes to something.
    """
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    vocab.update({f"w{i}": i for i in range(len(SPECIAL_TOKENS), vocab_size)})
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="<unk>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    if chat_template:
        tokenizer.chat_template = TINY_CHAT_TEMPLATE
    tokenizer.model_max_length = 1 << 30
    return tokenizer


def save_tiny_model(path, vocab: int = 64, layers: int = 2, seed: int = 0, model=None, tokenizer: bool = True) -> Path:
    """Write a tiny model (``model`` or a fresh random one) and its tokenizer as a model folder."""
    path = Path(path)
    model = model if model is not None else tiny_model(vocab=vocab, layers=layers, seed=seed)
    model.save_pretrained(str(path))
    if tokenizer:
        tiny_tokenizer(int(model.get_output_embeddings().weight.shape[0])).save_pretrained(str(path))
    return path


def perturbed_copy(model, scale: float, seed: int = 0):
    """A deep copy of ``model`` with Gaussian noise on every weight: a helper that drafts well
    but not perfectly, so that drafts get both accepted and rejected.

    Each tensor ``w`` gets noise of standard deviation ``scale * rms(w)``, so one ``scale``
    means the same relative disturbance for embeddings, projections and norm weights alike.
    Tied tensors stay tied (the copy keeps the sharing) and are disturbed once.
    """
    import torch

    noisy = copy.deepcopy(model)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for param in noisy.parameters():
            rms = param.detach().float().pow(2).mean().sqrt()
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float32) * (scale * rms)
            param.add_(noise.to(device=param.device, dtype=param.dtype))
    return noisy.eval()
