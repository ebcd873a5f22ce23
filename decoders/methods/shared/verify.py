"""The only places that decide acceptance: greedy chains, greedy trees, exact sampling.

Chains and sampling work on device tensors and never read them on the host (the caller packs
the verdict into the iteration's one host transfer, the gpt-fast pattern); the tree rule works
on the host values that one transfer brought back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import torch


@dataclass
class Verdict:
    """Verification of one draft chain, still on the device."""

    n_accepted: torch.Tensor  # 0-d long
    next_token: torch.Tensor  # 0-d long: the fix (after a rejection) or the bonus token
    acc_prob: torch.Tensor  # [g] probability that each draft is accepted
    beta: torch.Tensor  # [g] sum(min(p, q)) per position (1/0 argmax match when greedy)


def accept_prefix(best: torch.Tensor, drafts: torch.Tensor) -> Verdict:
    """Accept the longest prefix of ``drafts`` [g] equal to the target's argmax ``best`` [g+1]
    at the same positions; the next token is the target's argmax right after that prefix.

    Greedy decoding is speculative sampling at temperature 0, where p and q are one-hot: the
    acceptance probability min(1, p/q) and sum(min(p, q)) both become "argmax matches".
    """
    import torch

    g = drafts.numel()
    match = (best[:g] == drafts).to(torch.float32)
    n = match.cumprod(0).sum().long() if g else torch.zeros((), dtype=torch.long, device=best.device)
    return Verdict(n, _at(best, n), match, match)


def accept_tree(best: Sequence[int], tokens: Sequence[int], parents: Sequence[int]) -> tuple[list[int], int]:
    """Greedy verification of a token tree: the longest root-to-node path whose every token is
    the target's argmax after its parent, and the target's next token after that path.

    ``best[0]`` is the target's argmax after the sequence so far, ``best[1 + i]`` after node i;
    ``parents[i]`` is node i's parent (-1: the root, i.e. the sequence so far), parents before
    children. Among equally long paths the first in node order wins.
    """
    accepted: list[bool] = []
    depth: list[int] = []
    for token, parent in zip(tokens, parents, strict=False):
        after_parent = best[parent + 1]  # row 0 for the root
        ok = token == after_parent and (parent < 0 or accepted[parent])
        accepted.append(ok)
        depth.append(0 if parent < 0 else depth[parent] + 1)
    deepest = max((i for i in range(len(tokens)) if accepted[i]), key=lambda i: depth[i], default=None)
    if deepest is None:
        return [], int(best[0])
    path = [deepest]
    while parents[path[-1]] >= 0:
        path.append(parents[path[-1]])
    path.reverse()
    return path, int(best[deepest + 1])


def verify_sampling(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, gen: torch.Generator) -> Verdict:
    """Exact speculative sampling: the emitted tokens are distributed as the target's samples.

    ``p`` [g+1, V] target probabilities, ``q`` [g, V] helper probabilities, ``drafts`` [g] sampled
    from q. Draft i is accepted with probability min(1, p_i(d)/q_i(d)); at the first rejection the
    token is resampled from normalise(max(0, p_i - q_i)); if all pass, a bonus token comes from p_g.
    """
    import torch

    from decoders.backends.sampling import sample

    g = drafts.numel()
    idx = torch.arange(g, device=p.device)
    p_d = p[idx, drafts]
    q_d = q[idx, drafts]
    acc_prob = torch.clamp(p_d / q_d.clamp_min(1e-20), max=1.0)
    u = torch.rand(g, generator=gen, device=p.device)
    accepted = (u < acc_prob).to(torch.float32)
    n = accepted.cumprod(0).sum().long()
    residual = (p[:g] - q).clamp_min(0)
    mass = residual.sum(-1, keepdim=True)
    # where p <= q everywhere (mass 0) a rejection cannot happen; fall back to p to stay defined
    residual = torch.where(mass > 1e-12, residual / mass.clamp_min(1e-30), p[:g])
    candidates = sample(torch.cat([residual, p[g:]]), gen)  # [g+1]: a fix per position, then a bonus
    beta = torch.minimum(p[:g], q).sum(-1)
    return Verdict(n, _at(candidates, n), acc_prob, beta)


def _at(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``values[index]`` for a 0-d device index, as a kernel: indexing with a 0-d tensor may read
    it on the host (a sync on CUDA)."""
    return values.index_select(0, index.reshape(1)).reshape(())
