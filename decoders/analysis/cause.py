"""Why a run did not pay: which constraint binds, acceptance or cost, from the run's own figures.

A method pays when the tokens one iteration yields outweigh what the iteration costs in target
one-token steps. With a helper (Theorem 3.8 of Leviathan et al. with the measured verify cost):
tokens = E[tokens](alpha, gamma), cost = gamma * c + T(gamma + 1) (+ a trained head's catch-up per
token). Two counterfactuals from the run's own alpha_hat, c_hat, T and gamma say what binds:
every draft accepted (alpha = 1) at this cost, and a free helper (c = 0) at this acceptance.

- alpha = 1 would not pay: the cost binds (no acceptance can rescue it);
- c = 0 would not pay: the acceptance binds (no cheaper helper can rescue it);
- both: both bind; neither: each alone would pay, so the sentence says what each would need
  (a helper costing under c*, or alpha above alpha*).

Beside that, the one whose relief gains more (every draft accepted against a free helper) is named
as what limits the run more: also where the theorem expects the run to pay and it did not.

A method that drafts with nothing (prompt lookup, Jacobi, lookahead) has no helper to cost: tau
tokens per decode forward against a forward costing T one-token steps; it pays above T tokens
per forward, and the cost binds where even every draft accepted would yield no more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from decoders.analysis.theory import cost_aware_speedup, expected_tokens

Binding = Literal["acceptance", "cost", "both", "neither", "none"]

#: A verify forward measured under this many one-token steps: the one-token step it is divided
#: by was slowed (a verify forward of several tokens is never cheaper than one of one).
CHEAPER_THAN_ONE = 0.95


@dataclass(frozen=True)
class Cause:
    """What binds (``none``: the figures say the run should pay) and the words that say so."""

    binding: Binding
    words: str


def _verify(verify_cost: float) -> tuple[float, str]:
    """The verify cost the counterfactuals use (at least one step) and a note where the measured
    one was under it."""
    if verify_cost < CHEAPER_THAN_ONE:
        return 1.0, (f" (a verify measured at {verify_cost:.2f} of a one-token step says the step it is divided by "
                     "was slowed: taken as 1)")
    return verify_cost, ""


def helper_cause(alpha: float, gamma: int, c: float, verify_cost: float, per_token: float = 0.0) -> Cause:
    """What binds a linear draft of ``gamma`` tokens from a helper costing ``c`` target steps, at
    acceptance ``alpha``, with a (gamma+1)-token verify costing ``verify_cost`` one-token steps."""
    alpha = min(max(alpha, 0.0), 1.0)
    gamma = max(gamma, 1)
    T, note = _verify(verify_cost)
    predicted = cost_aware_speedup(alpha, gamma, c, T, per_token)
    full = cost_aware_speedup(1.0, gamma, c, T, per_token)  # every draft accepted, at this cost
    free = cost_aware_speedup(alpha, gamma, 0.0, T, per_token)  # a free helper, at this acceptance
    # the constraint whose relief gains more limits the run more
    more = (f"acceptance limits it more (every draft accepted: {full:.2f}x; a free helper: {free:.2f}x)"
            if full >= free else
            f"cost limits it more (a free helper: {free:.2f}x; every draft accepted: {full:.2f}x)")
    if predicted > 1.0:
        return Cause("none", f"the theorem expects {predicted:.2f}x at these figures{note}; {more}")
    if full <= 1.0 and free <= 1.0:  # break-even is not paying
        return Cause("both", f"acceptance and cost both bind{note}: every draft accepted would give only "
                             f"{full:.2f}x, a free helper only {free:.2f}x")
    if full <= 1.0:
        return Cause("cost", f"cost binds, not acceptance{note}: every draft accepted would give only {full:.2f}x, "
                             f"a free helper {free:.2f}x")
    if free <= 1.0:
        return Cause("acceptance", f"acceptance binds, not the helper's cost{note}: a free helper would give only "
                                   f"{free:.2f}x, every draft accepted {full:.2f}x")
    tokens = expected_tokens(alpha, gamma)
    c_even = (tokens * (1 - per_token) - T) / gamma  # the helper cost at which this acceptance breaks even
    alpha_even = _break_even_alpha(gamma, c, T, per_token)
    return Cause("neither", f"neither alone binds{note}: it would pay with a helper costing under {c_even:.2f} or "
                            f"with alpha above {alpha_even:.2f}; {more}")


def _break_even_alpha(gamma: int, c: float, verify_cost: float, per_token: float) -> float:
    """The acceptance at which the speedup reaches 1 (it rises with alpha; bisection)."""
    low, high = 0.0, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        if cost_aware_speedup(mid, gamma, c, verify_cost, per_token) < 1.0:
            low = mid
        else:
            high = mid
    return high


def forward_cause(tau: float, forward_cost: float, most_tokens: float | None = None,
                  drafting_cost: float | None = None) -> Cause:
    """What binds a method that drafts with nothing: ``tau`` tokens per decode forward (the
    prefill's left out) against a forward costing ``forward_cost`` one-token steps on average.
    ``most_tokens``: what a drafting forward would yield with every draft accepted (the mean draft
    length plus one; None: not known), against what it cost (``drafting_cost``; the average where
    not known)."""
    cost, note = _verify(forward_cost)
    drafting = max(drafting_cost if drafting_cost is not None else cost, 1.0)
    if tau >= cost:
        return Cause("none", f"neither acceptance nor cost binds: {tau:.2f} tokens per decode forward outweigh "
                             f"its cost of {cost:.2f} one-token steps{note}")
    if most_tokens is not None and most_tokens < drafting:
        return Cause("cost", f"cost binds: a drafting forward costs {drafting:.2f} one-token steps{note}, more than "
                             f"the {most_tokens:.1f} tokens it yields with every draft accepted")
    full = f"; every draft accepted: {most_tokens:.1f}" if most_tokens is not None else ""
    return Cause("acceptance", f"acceptance binds: {tau:.2f} tokens per decode forward against a forward costing "
                               f"{cost:.2f} one-token steps{note}{full}")
