"""Probability helpers shared by the methods; everything stays on the model's device."""

from __future__ import annotations

import torch


def make_generator(seed: int, device) -> torch.Generator:
    """A generator on ``device`` (CUDA sampling needs a CUDA generator), seeded for replay."""
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    return gen


def probs(logits: torch.Tensor, temperature: float, greedy: bool) -> torch.Tensor:
    """Softmax of float32 logits; greedy runs report the untempered distribution."""
    if greedy or temperature == 1.0:
        return torch.softmax(logits, dim=-1)
    return torch.softmax(logits / temperature, dim=-1)


def sample(p: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One token per row of ``p`` (rows sum to 1), as a LongTensor on p's device, no host sync."""
    return torch.multinomial(p, 1, generator=gen).squeeze(-1)


def pick(logits: torch.Tensor, p: torch.Tensor | None, greedy: bool, gen) -> torch.Tensor:
    """The next token(s): argmax of the logits, or a sample from ``p``."""
    return logits.argmax(-1) if greedy else sample(p, gen)
