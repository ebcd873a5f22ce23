"""Lookahead's shape, window W and verification branches G, chosen for what a wide forward costs.

Every lookahead step is one target forward over the Jacobi window and the pool's candidates:
about (N - 1) * (W + G) positions. Where a wide forward costs about as much as a one-token step
(a GPU), the widest shape pays: more n-grams, more candidates, more tokens per step. Where it
does not (a CPU: T(16) is about 3 on two AVX2 cores with SmolLM2-135M), the few extra tokens a
wide window buys cost more than they bring.

With ``draft_policy = adaptive`` the W and G given are caps, and each run takes the shape of
`LADDER` (or the caps themselves) with the most expected tokens per unit of cost,
``TAU[shape] / T(positions)``, T read from the verify-cost curve measured at this context
(`decoders.methods.shared.draft_policy.VerifyCost`: the curve where known, beyond it the curve's own
slope, and without a curve 1 + slope (n - 1) with a CPU prior, or a GPU's on CUDA).
``TAU`` is what each shape emitted per step on the bundled model, N = 3, text pool, 12
Spec-Bench prompts, 64 tokens (bench, 2026-12-01): only their order and ratios matter here.
``fixed`` runs W and G as given. The shape never changes the output.
"""

from __future__ import annotations

from dataclasses import dataclass

from decoders.methods.shared.draft_policy import VerifyCost

#: The parameters the adaptive policy treats as caps: a sweep over one of them runs it fixed, so
#: that each swept value is the shape that ran (`swept`).
SHAPE_PARAMS = ("window", "verify_branches")
#: (W, G) -> tokens per step measured for that shape (see the module docstring)
TAU = {(1, 1): 1.31, (1, 2): 1.37, (2, 2): 1.44, (4, 4): 1.49}
LADDER = tuple(TAU)
GPU_SLOPE = 0.002  # a wide forward on a GPU costs about one step (T(16) about 1.03): the prior before a curve


@dataclass(frozen=True)
class Shape:
    window: int
    branches: int
    positions: int  # the forward's width at most: window and candidates
    cost: float  # T(positions)
    reason: str  # one line: why this shape

    def text(self) -> str:
        return f"W={self.window}, G={self.branches}"


def swept(name: str) -> dict[str, str]:
    """What a sweep of lookahead's parameter ``name`` holds fixed: its shape (so each swept value
    is the shape that ran, not a cap the adaptive policy narrows)."""
    return {"draft_policy": "fixed"} if name in SHAPE_PARAMS else {}


def positions(window: int, branches: int, ngram: int) -> int:
    """Tokens in one lookahead forward at most: the last token, the window's (N - 1) levels of W
    columns less that token, and G candidate n-grams of N - 1 tokens each."""
    return (ngram - 1) * (window + branches)


def _tau(window: int, branches: int) -> float:
    """The measured tokens per step of the widest ladder shape within (window, branches)."""
    fits = [tau for (w, g), tau in TAU.items() if w <= window and g <= branches]
    return max(fits) if fits else min(TAU.values())


def choose(window: int, branches: int, ngram: int, cost_curve: list[float] | None, device: str = "cpu",
           adaptive: bool = True) -> Shape:
    """The shape one run uses, with the caps ``window`` and ``branches`` (see the module docstring)."""
    if cost_curve and len(cost_curve) > 1:  # beyond the curve: its own slope, not a prior
        verify = VerifyCost(cost_curve, (cost_curve[-1] - 1.0) / (len(cost_curve) - 1))
    else:
        verify = VerifyCost(cost_curve, GPU_SLOPE) if device == "cuda" else VerifyCost(cost_curve)
    where = "the measured verify-cost curve" if cost_curve else "a prior cost slope (no curve measured yet)"

    full = positions(window, branches, ngram)
    if not adaptive:
        return Shape(window, branches, full, round(verify.cost(full), 3), "fixed: W and G as given")
    candidates = {(w, g) for w, g in LADDER if w <= window and g <= branches} | {(window, branches)}

    def value(s: tuple[int, int]) -> tuple[float, int]:
        return _tau(*s) / verify.cost(positions(*s, ngram)), positions(*s, ngram)

    # most tokens per cost; on a tie (a flat curve) the wider shape
    best = max(candidates, key=value)
    n = positions(*best, ngram)
    cost = round(verify.cost(n), 3)
    if best == (window, branches):
        why = (f"as given, the most tokens per cost: its {n}-token forward costs T({n}) = {cost:.2f} one-token "
               f"steps ({where})")
    else:
        why = (f"narrowed from W={window}, G={branches}: a {full}-token forward costs T({full}) = "
               f"{verify.cost(full):.2f} one-token steps, a {n}-token one T({n}) = {cost:.2f} ({where})")
    return Shape(*best, n, cost, why)
