"""What a chain draft of acceptance α gains over a finite budget at batch B: the expected verify
forwards and their cost until every row is done, beside Theorem 3.8's asymptotic tokens per
iteration (`decoders.analysis.theory`), which leaves out both (issue 39 item 5).

The model is the batch bench's synthetic cells (`decoders.bench.batch_synthetic`) as they run:
each of B rows decodes ``tokens`` tokens after the prefill's first; an iteration drafts
min(γ, r - 1) tokens for a row with r tokens to go (the budget's last token is the target's own),
each right with probability α independently until the first wrong one, and the row keeps its right
prefix plus the target's next token. The rows are independent, so a row's state after k forwards
is a Markov chain over the tokens it has left, and the batch's forward k runs while any row is
active: E[forwards] = Σ_k (1 - Π_rows P(F ≤ k)) (the expected maximum of the rows' forward counts).
A forward costs T(B', w + 1) with B' the rows still active and w the widest draft among them, and
the draft c·w one-token steps of the full batch T(B, 1); autoregressive decoding takes ``tokens``
forwards of T(B, 1) each. Pure functions of numbers: α may be a `fractions.Fraction` (exact).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import comb
from typing import Any

#: Below this a state's probability is dropped (a long budget's far tails), except for exact
#: (Fraction) arithmetic, whose tiny cases never come near it.
FLOOR = 1e-18
#: T(B', k): the cost of a forward of k positions for B' rows, in any one unit.
Cost = Callable[[int, int], float]


def iteration_tokens(alpha: Any, gamma: int, remaining: int) -> list[Any]:
    """P(an iteration yields j + 1 tokens), j = 0..min(γ, remaining - 1), for a row with
    ``remaining`` tokens to go (at least 1): α^j (1 - α) for a first wrong draft at j, α^g for a
    chain of g right ones."""
    if remaining < 1:
        raise ValueError(f"a row with {remaining} tokens to go takes no forward")
    drafted = max(0, min(gamma, remaining - 1))
    return [alpha ** j * (1 - alpha) for j in range(drafted)] + [alpha ** drafted]


def row_states(tokens: int, alpha: Any, gamma: int, floor: float = FLOOR) -> list[dict[int, Any]]:
    """One row's distribution over tokens to go after k = 0, 1, ... forwards ({remaining: P};
    remaining 0: done), until it is done surely (at most ``tokens`` forwards: each yields one)."""
    if tokens < 0:
        raise ValueError(f"a row decodes 0 or more tokens, got {tokens}")
    states: list[dict[int, Any]] = [{tokens: alpha ** 0}]
    while any(r > 0 for r in states[-1]):
        after: dict[int, Any] = {}
        for r, p in states[-1].items():
            if r == 0:
                after[0] = after.get(0, 0) + p
                continue
            for j, q in enumerate(iteration_tokens(alpha, gamma, r)):
                mass = p * q
                if mass > floor or not isinstance(mass, float):
                    left = max(0, r - (j + 1))
                    after[left] = after.get(left, 0) + mass
        states.append(after)
    return states


def forward_cdf(tokens: int, alpha: Any, gamma: int) -> list[Any]:
    """P(a row is done within k forwards), k = 0, 1, ..., ending at 1 (or within FLOOR of it)."""
    return [states.get(0, 0) for states in row_states(tokens, alpha, gamma)]


def expected_max(cdfs: Sequence[Sequence[Any]]) -> Any:
    """E[max of independent counts] from each one's CDF over 0, 1, ...: Σ_k (1 - Π_i P(F_i ≤ k)),
    a CDF past its end read as its last value."""
    longest = max((len(c) for c in cdfs), default=0)
    total: Any = 0
    for k in range(longest):
        product: Any = 1
        for cdf in cdfs:
            product = product * cdf[min(k, len(cdf) - 1)]
        total += 1 - product
    return total


def expected_forwards(tokens: int, alpha: Any, gamma: int, rows: int = 1) -> Any:
    """The expected verify forwards until all ``rows`` rows (each decoding ``tokens`` tokens) are
    done: the expected maximum of the rows' forward counts."""
    cdf = forward_cdf(tokens, alpha, gamma)
    return expected_max([cdf] * rows)


def batch_cost(tokens: int, alpha: Any, gamma: int, c: Any, rows: int, cost: Cost) -> Any:
    """The expected time of the draft-and-verify forwards until every row is done, in units of
    T(rows, 1): each forward T(B', w + 1) / T(rows, 1) plus c·w, where B' is the rows still
    active and w the longest draft among them (every row's state independent, so (B', w) has
    the distribution of B identical draws of a row's state)."""
    full = cost(rows, 1)
    total: Any = 0
    for states in row_states(tokens, alpha, gamma)[:-1]:
        done = states.get(0, 0)
        by_width = [0] * (gamma + 1)  # P(active with a draft of w)
        for r, p in states.items():
            if r > 0:
                by_width[min(gamma, r - 1)] += p
        upto = [done]  # P(done, or active with a draft of at most w), w = -1, 0, ..., γ
        for p in by_width:
            upto.append(upto[-1] + p)
        for active in range(1, rows + 1):
            weight = comb(rows, active) * done ** (rows - active)
            for w in range(gamma + 1):
                # P(exactly these rows active, the widest draft w) = C(B, a) done^(B-a) (S_w^a - S_{w-1}^a)
                p = weight * ((upto[w + 1] - done) ** active - (upto[w] - done) ** active)
                if p:
                    total += p * (cost(active, w + 1) / full + c * w)
    return total


def finite_speedup(tokens: int, alpha: Any, gamma: int, c: Any, rows: int, cost: Cost) -> Any:
    """The expected decode speedup of the chain draft over autoregressive decoding of the same
    ``rows`` rows for ``tokens`` tokens each (``tokens`` forwards of T(rows, 1)); 1 for no tokens."""
    if tokens <= 0:
        return 1.0
    return tokens / batch_cost(tokens, alpha, gamma, c, rows, cost)


def surface_cost(surface: Mapping[int, Sequence[float]]) -> Cost:
    """T(B', k) from a measured surface ({batch size: [T(B, 1), T(B, 2), ...]}), for any B' ≥ 1:
    linear between the measured sizes on either side of B', the nearest one's beyond them, and
    k past a size's measured widths its last one's."""
    sizes = sorted(surface)
    if not sizes or not all(surface[b] for b in sizes):
        raise ValueError("a cost surface needs at least one batch size with at least one width measured")

    def at(size: int, k: int) -> float:
        curve = surface[size]
        return float(curve[min(k, len(curve)) - 1])

    def cost(batch: int, k: int) -> float:
        below = [b for b in sizes if b <= batch]
        above = [b for b in sizes if b >= batch]
        if not below:
            return at(above[0], k)
        if not above:
            return at(below[-1], k)
        low, high = below[-1], above[0]
        if low == high:
            return at(low, k)
        share = (batch - low) / (high - low)
        return at(low, k) + share * (at(high, k) - at(low, k))

    return cost
