"""The draft length at batch B from the cost model (issue 39, item 4).

At batch B every row's draft is verified in one forward, so the draft length K is chosen once per
iteration for all the rows together: the K that maximises expected tokens per unit of time,

    U(K) = sum over rows of E[accepted + 1 | K]  /  (T(B, w(K)) + c * K),

where w(K) = 1 + the longest draft any row sends at K (a row with a shorter draft pads), T(B, k) is
the measured verify-cost surface (`decoders.bench.batch_surface`, in one-position steps of one
sequence; interpolated between the batch sizes measured, extrapolated beyond its widths), ``c`` the
draft's cost per drafted position in the same unit (0 for prompt lookup: its draft is a copy), and
E from each row's conditional per-position acceptance measured so far: position j's acceptance
given that the positions before it were accepted, as a posterior mean shrunk toward position j - 1's
(position 0's toward the batch-1 policy's prior, `decoders.methods.shared.draft_policy.PRIOR_ACCEPT`). K = 0 (a plain
autoregressive step for the batch) is always a candidate; ties go to the shorter draft.

`best_draft_length` is the pure decision; `BatchDraftPolicy` keeps the per-row counts and, like
the batch-1 policy, re-measures with a short draft after `EXPLORE_EVERY` undrafted iterations in a
row (else estimates that switched drafting off would never be measured again), backing off (twice
as long a wait each time, up to four times) while drafting still does not pay: a model draft's
re-measuring steps cost real forwards. The policy only
shortens drafts, so each row's greedy output is the one it has at any K.

A model draft (a helper, the int4 copy, a trained head) is chosen for before it drafts: K of its
steps are all the iteration pays for, K = 0 none (a plain step; the draft catches up on the
accepted tokens at its next draft). Its ``c`` is then measured in the run (``learn_draft_cost``):
the seconds of each drafted position of the batch (its steps, and its settling after the verify)
over the seconds one position of one sequence costs, read from each verify forward's time and its
T(B, w) on the surface. Until the first draft is judged it drafts in full, to measure both.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence

from decoders.methods.shared.draft_policy import EXPLORE_EVERY, PRIOR_ACCEPT, PRIOR_SLOPE

#: A draft length chosen to re-measure acceptance after plain steps.
EXPLORE_K = 2


def expected_tokens(acceptance: Sequence[float], k: int) -> float:
    """E[accepted + 1] of a draft of ``k`` positions, ``acceptance[j]``: position j's acceptance
    given positions < j accepted."""
    survive, total = 1.0, 1.0
    for j in range(k):
        survive *= acceptance[j]
        total += survive
    return total


def surface_cost(surface: Mapping[int, Sequence[float]] | None, batch: int, width: int) -> float:
    """T(``batch``, ``width``) from the measured surface: linear in B between the sizes measured
    (beyond the largest, along its last segment; below the smallest, the smallest's), in k beyond
    the widths measured along the last step; a wider forward never cheaper than a narrower one.
    Without a surface, the batch-1 policy's prior slope."""
    if not surface:
        return 1.0 + PRIOR_SLOPE * (width - 1)

    def along_k(b: int) -> float:
        row = surface[b]
        if width <= len(row):
            return max(row[:width])
        step = row[-1] - row[-2] if len(row) > 1 else PRIOR_SLOPE
        return row[-1] + max(0.0, step) * (width - len(row))

    sizes = sorted(surface)
    if batch in surface or len(sizes) == 1 or batch < sizes[0]:
        return along_k(batch if batch in surface else sizes[0])
    at = min(max(bisect.bisect_left(sizes, batch), 1), len(sizes) - 1)
    lo, hi = sizes[at - 1], sizes[at]
    t_lo, t_hi = along_k(lo), along_k(hi)
    return max(t_lo, t_lo + (t_hi - t_lo) * (batch - lo) / (hi - lo))


def best_draft_length(cost: Callable[[int], float], acceptances: Sequence[Sequence[float]],
                      available: Sequence[int], draft_cost: float = 0.0) -> tuple[int, list[float]]:
    """``(K, [U(0), U(1), ...])``: the draft length for the batch and each candidate's expected
    tokens per unit of time. ``cost(w)``: T(B, w) at this batch; ``acceptances[r]``: row r's
    conditional per-position acceptance (at least ``available[r]`` long); ``available[r]``: the
    longest draft row r has (0: none)."""
    longest = max(available, default=0)
    rates = []
    for k in range(longest + 1):
        tokens = sum(expected_tokens(acc, min(k, n)) for acc, n in zip(acceptances, available, strict=True))
        width = 1 + max((min(k, n) for n in available), default=0)
        rates.append(tokens / (cost(width) + draft_cost * k))
    best = max(range(len(rates)), key=lambda k: (rates[k], -k))
    return best, rates


class BatchDraftPolicy:
    """Chooses K for each batched iteration from the surface and each row's acceptance so far."""

    def __init__(self, max_k: int, surface: Mapping[int, Sequence[float]] | None = None, draft_cost: float = 0.0,
                 prior: tuple[float, float] = PRIOR_ACCEPT, learn_draft_cost: bool = False):
        self.max_k = max_k
        self.surface = {int(b): list(row) for b, row in (surface or {}).items()}
        self.draft_cost = draft_cost  # per drafted position, in one-position steps; the prior when learned
        self.prior = prior
        self.learn = learn_draft_cost
        self._counts: dict[int, list[list[int]]] = {}  # row -> per position [accepted, tried]
        self._undrafted = 0
        self._explore_every = EXPLORE_EVERY
        self._unit: float | None = None  # seconds of one position of one sequence (from the verify forwards)
        self._step: float | None = None  # seconds per drafted position of the batch

    @property
    def cost_per_draft(self) -> float:
        """A drafted position's cost in one-position steps: measured when learned, else given."""
        if self.learn and self._unit and self._step is not None:
            return self._step / self._unit
        return self.draft_cost

    def observe_times(self, batch: int, width: int, verify_s: float, drafted: int, draft_s: float) -> None:
        """One iteration's verify forward (``batch`` rows, ``width`` positions, ``verify_s``
        seconds) and draft (``drafted`` positions per row at most, ``draft_s`` seconds)."""
        if not self.learn:
            return
        unit = verify_s / surface_cost(self.surface, batch, width)
        self._unit = unit if self._unit is None else 0.8 * self._unit + 0.2 * unit
        if drafted:
            step = draft_s / drafted
            self._step = step if self._step is None else 0.8 * self._step + 0.2 * step

    def acceptance(self, row: int) -> list[float]:
        """Row ``row``'s conditional acceptance at positions 0..max_k - 1: each position's record
        shrunk toward the position before it (position 0 toward the prior), with the prior's
        weight. A position the drafts have not reached yet is then expected to do as the one
        before it, not as the prior: a draft accepted 0.99 at position 0 is not stuck at K = 1
        because position 1, never tried at K = 1, would read as a coin toss."""
        counts = self._counts.get(row) or [[0, 0]] * self.max_k
        a, b = self.prior
        out: list[float] = []
        for acc, tried in counts:
            toward = out[-1] if out else a / (a + b)
            out.append((acc + (a + b) * toward) / (tried + a + b))
        return out

    def choose(self, rows: Sequence[int], available: Sequence[int]) -> int:
        """The draft length for the batch of ``rows`` (the forward's rows, by a stable id), each
        with a draft of ``available[i]`` positions at most."""
        available = [min(n, self.max_k) for n in available]
        batch = len(rows)
        if self.learn and not self._counts:  # nothing judged yet: draft in full, measuring c and acceptance
            return max(available, default=0)
        k, _ = best_draft_length(lambda w: surface_cost(self.surface, batch, w),
                                 [self.acceptance(r) for r in rows], available, self.cost_per_draft)
        if k == 0 and max(available, default=0) > 0:
            self._undrafted += 1
            if self._undrafted >= self._explore_every:
                self._undrafted = 0
                self._explore_every = min(4 * EXPLORE_EVERY, 2 * self._explore_every)  # back off while it does not pay
                return min(EXPLORE_K, max(available))
        elif k:
            self._undrafted = 0
            self._explore_every = EXPLORE_EVERY
        return k

    def observe(self, row: int, drafted: int, accepted: int) -> None:
        """Row ``row`` sent ``drafted`` positions and the first ``accepted`` of them passed."""
        counts = self._counts.setdefault(row, [[0, 0] for _ in range(self.max_k)])
        for j in range(min(accepted + 1, drafted, self.max_k)):
            counts[j][1] += 1
            if j < accepted:
                counts[j][0] += 1
