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

import itertools
import statistics
from collections import defaultdict, deque

from decoders.analysis.theory import expected_tokens
from decoders.core.declarations import ParamSpec

PRIOR_SLOPE = 0.15  # extra cost per extra position, before the run has measured any
PRIOR_ACCEPT = (1.0, 1.0)  # Beta pseudo-counts (accepted, rejected) for an unseen match length
SLOPE_WINDOW = 15  # recent slope measurements the median is taken over
EXPLORE_EVERY = 8  # after this many matches in a row left undrafted, draft a short one to re-measure


DRAFT_POLICY = ParamSpec("draft_policy", "draft policy",
                         "adaptive drafts only what its expected acceptance pays for (never changing the "
                         "output; for lookahead, W and G become caps narrowed to what a wide forward pays for); fixed "
                         "drafts the full length (γ, K for prompt lookup, W and G for lookahead) whenever it can",
                         "adaptive", kind="choice", choices=("adaptive", "fixed"))


class VerifyCost:
    """The cost of a target forward over n positions, in one-position forwards: T(n) from the
    curve measured at this context where it reaches, beyond it and without it 1 + slope (n - 1),
    the slope being the median of the run's own recent measurements."""

    def __init__(self, cost_curve: list[float] | None = None, slope: float = PRIOR_SLOPE):
        # a wider forward never costs less than a narrower one: where timing noise put T(k) below
        # T(k - 1), the envelope keeps T(k - 1) (else a free-looking position would be drafted)
        self.cost_curve = list(itertools.accumulate(cost_curve or [], max))
        self.one: float | None = None  # EMA of one-position forward seconds
        self._slopes = deque([slope], maxlen=SLOPE_WINDOW)

    @property
    def slope(self) -> float:
        return max(0.0, statistics.median(self._slopes))

    def cost(self, positions: int) -> float:
        if positions <= len(self.cost_curve):
            return self.cost_curve[positions - 1]
        return 1.0 + self.slope * (positions - 1)

    def observe(self, positions: int, seconds: float) -> None:
        if positions == 1:
            self.one = seconds if self.one is None else 0.8 * self.one + 0.2 * seconds
        elif self.one and positions > 1:
            self._slopes.append((seconds / self.one - 1.0) / (positions - 1))


class AdaptiveDraftLength:
    """Chooses the draft length for each iteration from acceptance and cost seen so far."""

    def __init__(self, max_len: int, cost_curve: list[float] | None = None):
        """``cost_curve``: T(k) measured at this context (k = 1..), used as the cost of a forward
        over k positions where it reaches; beyond it, and without it, the run's own slope."""
        self.max_len = max_len
        self.verify = VerifyCost(cost_curve)
        # match length -> [accepted, rejected]
        self._acc: defaultdict[int, list[float]] = defaultdict(lambda: list(PRIOR_ACCEPT))
        self._undrafted = 0  # matches in a row the policy chose not to draft

    def acceptance(self, match_len: int) -> float:
        acc, rej = self._acc[match_len]
        return acc / (acc + rej)

    @property
    def slope(self) -> float:
        return self.verify.slope

    def cost(self, positions: int) -> float:
        return self.verify.cost(positions)

    def choose(self, match_len: int, available: int, extra: int = 0) -> int:
        """Draft length in 0..min(available, max_len) with the best expected tokens per cost;
        ``extra``: positions the forward runs whatever is drafted (lookahead's window)."""
        a = self.acceptance(match_len)
        best_k, best_rate = 0, 1.0 / self.cost(1 + extra)
        for k in range(1, min(available, self.max_len) + 1):
            rate = expected_tokens(a, k) / self.cost(k + 1 + extra)
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
        self.verify.observe(positions, seconds)


# --- speculative decoding: a helper model drafts, so each draft token has a cost and a confidence

CONF_BINS = (0.3, 0.5, 0.7, 0.85, 0.95)  # helper-confidence bins the acceptance is learned in
PRIOR_WEIGHT = 4.0  # pseudo-observations behind each bin's prior (the run's overall acceptance)
SPEC_PRIOR_ACCEPT = (0.5, 0.5)  # Beta pseudo-counts of a draft's acceptance: light, so one full draft teaches it
PRIOR_C = 0.5  # helper forward over target forward, before the run has measured both
STOP_GAMMA, STOP_BUDGET, STOP_PAY, STOP_SKIP, STOP_EXPLORE = "gamma", "budget", "confidence", "skip", "explore"
STOP_PREFILL = "prefill"
#: Why a draft ended, in words (the iteration detail and the record's ``draft_stop``).
STOP_TEXT = {
    STOP_GAMMA: "drafted the full γ",
    STOP_BUDGET: "drafted up to the tokens left",
    STOP_PAY: "stopped early: the helper's confidence said a longer draft would not pay for its cost",
    STOP_SKIP: "no draft: at this run's acceptance and helper cost a plain step is cheaper",
    STOP_EXPLORE: "a short draft to re-measure acceptance after plain steps",
    STOP_PREFILL: "no draft: the target's prefill gives the first token, and the self-draft then reads its cache",
}


class SpecDraftPolicy:
    """Adaptive draft length for speculative decoding.

    Before an iteration it drafts nothing when no draft length pays at the run's acceptance
    (a plain step is then cheaper), re-measuring now and then with a short draft. While drafting
    it stops as soon as the draft so far yields more tokens per unit of cost than any longer one
    is expected to: each drafted token's acceptance is estimated from the helper's confidence in
    it (its probability), calibrated on the run's own verdicts, per confidence bin, shrunk toward
    the run's overall acceptance. Costs are in target one-token forwards: ``c`` from the
    run's own helper and target forwards, the verify forward's T(k) from the measured curve or
    the run's own slope (`VerifyCost`). The policy reads only the helper's side, before
    verification, so greedy output stays identical and sampling stays exact.

    Sampling with a seed must give the same tokens every time, and timings differ between runs, so
    there the costs are fixed up front and never measured (``fixed_costs=(c, slope)``: c from the
    weight bytes each model reads per step, the slope from the device) and every decision follows
    from the seeded verdicts alone.
    """

    def __init__(self, gamma: int, cost_curve: list[float] | None = None,
                 fixed_costs: tuple[float, float] | None = None):
        self.gamma = gamma
        self.fixed_costs = fixed_costs
        self.verify = VerifyCost(None, fixed_costs[1]) if fixed_costs else VerifyCost(cost_curve)
        self._bins = [[0, 0] for _ in range(len(CONF_BINS) + 1)]  # [accepted, rejected] per confidence bin
        self._all = list(SPEC_PRIOR_ACCEPT)
        self._helper_one: float | None = None
        self._target_one: float | None = None  # one-token target step, estimated from verifies until a plain step runs
        self._explore_every = EXPLORE_EVERY
        self._undrafted = 0

    # estimates
    @property
    def c(self) -> float:
        if self.fixed_costs:
            return self.fixed_costs[0]
        one = self.verify.one or self._target_one
        return PRIOR_C if not (one and self._helper_one) else self._helper_one / one

    @property
    def fresh(self) -> bool:
        """No draft judged yet in this run."""
        return self._all == list(SPEC_PRIOR_ACCEPT)

    def alpha(self) -> float:
        """Mean acceptance of a draft token, before its confidence is known."""
        acc, rej = self._all
        return acc / (acc + rej)

    def acceptance(self, confidence: float) -> float:
        """A draft's acceptance given the helper's confidence in it: its bin's record, shrunk
        toward the run's overall acceptance (a quantized copy of the target is accepted at any
        confidence; a small helper model is not when unsure, and the bins learn which)."""
        acc, rej = self._bins[_bin(confidence)]
        return (acc + PRIOR_WEIGHT * self.alpha()) / (acc + rej + PRIOR_WEIGHT)

    def _rate(self, tokens: float, drafted: int) -> float:
        return tokens / (drafted * self.c + self.verify.cost(drafted + 1))

    def _best_more(self, tokens: float, survive: float, drafted: int, limit: int) -> float:
        """The best tokens-per-cost of drafting 1..(limit - drafted) more tokens at the mean acceptance."""
        a, best, gain = self.alpha(), 0.0, 0.0
        for m in range(1, limit - drafted + 1):
            survive *= a
            gain += survive
            best = max(best, self._rate(tokens + gain, drafted + m))
        return best

    # decisions
    def plan(self, budget: int) -> tuple[int, str | None]:
        """How many tokens this iteration may draft (0: a plain step) and, when none, why."""
        limit = min(self.gamma, budget)
        if limit <= 0:
            return 0, STOP_BUDGET
        # The first iteration drafts in full: it pays the helper's prefill and measures what the
        # estimates start from (a helper joining later would pay that prefill at a worse time).
        if self.fresh or self._best_more(1.0, 1.0, 0, limit) > self._rate(1.0, 0):
            self._undrafted = 0
            return limit, None
        self._undrafted += 1
        if self._undrafted >= self._explore_every:  # estimates that stop drafting must be re-measured
            self._undrafted = 0
            # back off while it still does not pay
            self._explore_every = min(4 * EXPLORE_EVERY, 2 * self._explore_every)
            return min(2, limit), STOP_EXPLORE
        return 0, STOP_SKIP

    def keep_drafting(self, confidences: list[float], limit: int) -> bool:
        """After drafting ``confidences`` (the helper's probability of each draft so far): does
        drafting on promise more tokens per cost than verifying now?"""
        if self.fresh:  # the first draft: nothing learned yet, measure the full length
            return len(confidences) < limit
        survive, tokens = 1.0, 1.0
        for conf in confidences:
            survive *= self.acceptance(conf)
            tokens += survive
        drafted = len(confidences)
        return drafted < limit and self._best_more(tokens, survive, drafted, limit) > self._rate(tokens, drafted)

    # learning
    def observe(self, confidences: list[float], accepted: int, helper_seconds: list[float], positions: int,
                seconds: float) -> None:
        """One iteration's verdict (drafts judged up to the first rejection) and its forwards."""
        for i, conf in enumerate(confidences[: accepted + 1]):
            ok = i < accepted
            self._bins[_bin(conf)][0 if ok else 1] += 1
            self._all[0 if ok else 1] += 1
        if accepted == len(confidences) and confidences:
            self._explore_every = EXPLORE_EVERY
        if self.fixed_costs:
            return
        for s in helper_seconds:
            self._helper_one = s if self._helper_one is None else 0.8 * self._helper_one + 0.2 * s
        if positions == len(confidences) + 1:  # a decode forward; not one that also prefilled
            self.verify.observe(positions, seconds)
            one = seconds / self.verify.cost(positions)
            self._target_one = one if self._target_one is None else 0.8 * self._target_one + 0.2 * one


def _bin(confidence: float) -> int:
    return sum(confidence >= edge for edge in CONF_BINS)

