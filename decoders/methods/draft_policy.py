"""How many drafted tokens to verify: as many as pay for the wider forward they cost.

A verify forward over n positions costs more than a one-token step wherever the hardware has no
spare compute (a CPU: about 1.7x for 5 positions with SmolLM2-135M), so a draft that is mostly
rejected makes decoding slower than plain autoregressive steps. The policy keeps two running
estimates, from the run itself:

- the acceptance rate of drafted tokens, separately for each n-gram match length (a 3-gram match
  predicts its continuation better than a 1-gram), as a Beta posterior mean;
- the cost of a forward over n positions relative to one position, as 1 + slope * (n - 1),
  the slope being the median of the run's own recent measurements (one slow outlier, a page
  fault or a garbage collection, must not switch drafting off for the rest of the run);

and drafts the k that maximises expected tokens per unit of cost,
(1 - a^(k+1)) / (1 - a) / cost(k + 1), where k = 0 (a plain step) is always a candidate.
"""

from __future__ import annotations

import statistics
from collections import defaultdict, deque

from decoders.theory import expected_tokens

PRIOR_SLOPE = 0.15  # extra cost per extra position, before the run has measured any
PRIOR_ACCEPT = (1.0, 1.0)  # Beta pseudo-counts (accepted, rejected) for an unseen match length
SLOPE_WINDOW = 15  # recent slope measurements the median is taken over
EXPLORE_EVERY = 8  # after this many matches in a row left undrafted, draft a short one to re-measure


class AdaptiveDraftLength:
    """Chooses the draft length for each iteration from acceptance and cost seen so far."""

    def __init__(self, max_len: int, cost_curve: list[float] | None = None):
        """``cost_curve``: T(k) measured at this context (k = 1..), used as the cost of a forward
        over k positions where it reaches; beyond it, and without it, the run's own slope."""
        self.max_len = max_len
        self.cost_curve = cost_curve or []
        self._acc = defaultdict(lambda: list(PRIOR_ACCEPT))  # match length -> [accepted, rejected]
        self._one = None  # EMA of one-position forward seconds
        self._slopes = deque([PRIOR_SLOPE], maxlen=SLOPE_WINDOW)
        self._undrafted = 0  # matches in a row the policy chose not to draft

    def acceptance(self, match_len: int) -> float:
        acc, rej = self._acc[match_len]
        return acc / (acc + rej)

    @property
    def slope(self) -> float:
        return max(0.0, statistics.median(self._slopes))

    def cost(self, positions: int) -> float:
        if positions <= len(self.cost_curve):
            return self.cost_curve[positions - 1]
        return 1.0 + self.slope * (positions - 1)

    def choose(self, match_len: int, available: int) -> int:
        """Draft length in 0..min(available, max_len) with the best expected tokens per cost."""
        a = self.acceptance(match_len)
        best_k, best_rate = 0, 1.0
        for k in range(1, min(available, self.max_len) + 1):
            rate = expected_tokens(a, k) / self.cost(k + 1)
            if rate > best_rate:
                best_k, best_rate = k, rate
        if best_k == 0 and available > 0:
            # Estimates that stop drafting would otherwise never be measured again: a slow spell
            # early in a run (another process, a page fault) must not switch drafting off for good.
            self._undrafted += 1
            if self._undrafted >= EXPLORE_EVERY:
                self._undrafted = 0
                return min(2, available, self.max_len)
        else:
            self._undrafted = 0
        return best_k

    def observe(self, match_len: int | None, drafted: int, accepted: int, positions: int, seconds: float) -> None:
        """Learn from one iteration: how many drafts passed, and what the forward cost."""
        if drafted and match_len is not None:
            counts = self._acc[match_len]
            counts[0] += accepted
            counts[1] += 1 if accepted < drafted else 0
        if positions == 1:
            self._one = seconds if self._one is None else 0.8 * self._one + 0.2 * seconds
        elif self._one and positions > 1:
            self._slopes.append((seconds / self._one - 1.0) / (positions - 1))
