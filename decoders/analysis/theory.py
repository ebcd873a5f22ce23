"""What theory predicts for speculative decoding (Leviathan et al. 2023, section 3)."""

from __future__ import annotations


def expected_tokens(alpha: float, gamma: int) -> float:
    """E[tokens per iteration] with acceptance rate ``alpha`` and ``gamma`` drafts (Eq. 1)."""
    alpha = min(max(alpha, 0.0), 1.0)
    if gamma <= 0:
        return 1.0
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, gamma: int, c: float) -> float:
    """Expected wall-clock improvement (Theorem 3.8): E[tokens] / (gamma * c + 1).

    ``c`` is the cost of one helper forward relative to one target forward. The theorem assumes
    a verify forward of gamma + 1 tokens costs the same as a one-token forward, which holds on a
    GPU with spare compute and not on a small CPU; see `cost_aware_speedup`.
    """
    if gamma <= 0:
        return 1.0
    return expected_tokens(alpha, gamma) / (gamma * c + 1)


def cost_aware_speedup(alpha: float, gamma: int, c: float, verify_cost: float, per_token: float = 0.0) -> float:
    """Theorem 3.8 with the measured cost of a (gamma+1)-token verify (``verify_cost`` target
    one-token forwards) in place of 1, and ``per_token`` target steps more for each token an
    iteration yields (a trained head's catch-up over the verified positions)."""
    if gamma <= 0:
        return 1.0
    tokens = expected_tokens(alpha, gamma)
    return tokens / (gamma * c + verify_cost + per_token * tokens)


def speedup_curve(alpha: float, c: float, gammas=range(1, 11)) -> list[list[float]]:
    """[[gamma, predicted speedup], ...] for the gamma plot."""
    return [[g, round(predicted_speedup(alpha, g, c), 3)] for g in gammas]


def best_gamma(curve: list[list[float]]) -> int:
    return int(max(curve, key=lambda row: row[1])[0])


def chain_speedup(accept_per_depth: list[float], gamma: int, c: float, verify_cost: float,
                  per_token: float = 0.0) -> float:
    """Theorem 3.8 with the measured verify cost for a chain whose acceptance is known per depth
    (depth d given depths 1..d-1 accepted, as a trained head's held-out evaluation gives it): a
    chain of ``gamma`` drafts yields 1 + a1 + a1*a2 + ... tokens per target forward; the depths
    beyond those known repeat the last. ``per_token``: as in `cost_aware_speedup`."""
    rates = list(accept_per_depth[:gamma]) or [0.0]
    rates += [rates[-1]] * (gamma - len(rates))
    tokens, run = 1.0, 1.0
    for a in rates:
        run *= min(max(a, 0.0), 1.0)
        tokens += run
    return tokens / (gamma * c + verify_cost + per_token * tokens)
