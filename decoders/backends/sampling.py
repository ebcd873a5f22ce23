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
    """One token per row of ``p`` (rows sum to 1), as a LongTensor on p's device, no host sync.

    The exponential race (pytorch-labs/gpt-fast): with E_i independent Exponential(1),
    ``argmax(p_i / E_i)`` = ``argmin(E_i / p_i)``, the first of independent exponential clocks
    of rates p_i to ring, is token i with probability exactly p_i. Unlike ``torch.multinomial``
    (which checks its input on the host, twice per call on CUDA) it is three kernels and no
    sync. Noise is kept above zero, so a zero-probability token can never win (0 / 0).
    """
    noise = torch.empty_like(p, dtype=torch.float32).exponential_(1.0, generator=gen)
    return (p / noise.clamp_min_(torch.finfo(torch.float32).tiny)).argmax(-1)


def pick(logits: torch.Tensor, p: torch.Tensor | None, greedy: bool, gen) -> torch.Tensor:
    """The next token(s): argmax of the logits, or a sample from ``p``."""
    if greedy:
        return logits.argmax(-1)
    assert p is not None, "sampling needs the probabilities"
    return sample(p, gen)
