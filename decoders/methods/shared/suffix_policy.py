"""How much of a suffix draft to verify, and whether it or a model's draft goes to the target.

`SuffixPolicy` calibrates a suffix draft's branch frequencies on the run's own verdicts and cuts
the draft where a longer one would not pay for its verify forward (suffix decoding's adaptive
policy). `HybridChoice` is speculative decoding's choice each iteration between that free draft
and the helper model's (Arctic Inference's hybrid rule: the draft with the larger expected accepted
length). Pure Python: the costs come from `VerifyCost`, the verdicts from the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from decoders.analysis.theory import expected_tokens
from decoders.methods.shared.draft_policy import EXPLORE_EVERY, STOP_TEXT, VerifyCost

CONF_BINS = (0.2, 0.4, 0.6, 0.8, 0.95)  # branch-frequency bins the acceptance is learned in
PRIOR_WEIGHT = 2.0  # pseudo-observations behind each bin's prior (the branch frequency itself)
MODEL_PRIOR = (1.0, 1.0)  # Beta pseudo-counts (accepted, rejected) of a model draft token, before any verdict


class SuffixPolicy:
    """Cuts a draft to the length whose expected tokens per unit of verify cost is best.

    A drafted token's acceptance is its branch frequency calibrated on this run's verdicts, per
    frequency bin (shrunk toward the frequency itself); the cost of a forward over k positions is
    T(k) measured at this context, else the run's own slope. Sampling must give the same tokens for
    a seed whatever the timings, so there the costs are never measured (``learn_costs`` False)."""

    def __init__(self, cost_curve: list[float] | None, learn_costs: bool):
        self.verify = VerifyCost(cost_curve if learn_costs else None)
        self.learn_costs = learn_costs
        self._bins = [[0.0, 0.0] for _ in range(len(CONF_BINS) + 1)]
        self._undrafted = 0

    def acceptance(self, prob: float) -> float:
        acc, rej = self._bins[_bin(prob)]
        return (acc + PRIOR_WEIGHT * prob) / (acc + rej + PRIOR_WEIGHT)

    def choose(self, probs: list[float]) -> int:
        """How many of a path draft's tokens to verify: a path is the tree whose every node hangs
        below the one before it."""
        return self.choose_tree(probs, list(range(-1, len(probs) - 1)))

    def choose_tree(self, probs: list[float], parents: list[int]) -> int:
        """How many of a tree draft's nodes (best first, so any first k make a tree) to verify:
        the count whose expected tokens (one plus every node's calibrated path probability) per
        unit of verify cost is best."""
        best_k, best_rate = 0, 1.0 / self.verify.cost(1)
        survive: list[float] = []
        tokens = 1.0
        for k, (p, parent) in enumerate(zip(probs, parents, strict=True), start=1):
            s = (survive[parent] if parent >= 0 else 1.0) * self.acceptance(p)
            survive.append(s)
            tokens += s
            rate = tokens / self.verify.cost(k + 1)
            if rate > best_rate:
                best_k, best_rate = k, rate
        if best_k == 0 and probs:
            self._undrafted += 1
            if self._undrafted >= EXPLORE_EVERY:
                self._undrafted = 0
                return min(2, len(probs))
        else:
            self._undrafted = 0
        return best_k

    def observe_tree(self, probs: list[float], parents: list[int], path: list[int], positions: int,
                     seconds: float) -> None:
        """The verdicts of a tree step: each node the target judged (under the root or an accepted
        node) was accepted or refused."""
        on_path = set(path)
        for i, (p, parent) in enumerate(zip(probs, parents, strict=True)):
            if parent < 0 or parent in on_path:
                self._bins[_bin(p)][0 if i in on_path else 1] += 1
        if self.learn_costs:
            self.verify.observe(positions, seconds)

    def observe(self, probs: list[float], accepted: int, positions: int, seconds: float) -> None:
        for i, p in enumerate(probs[: accepted + 1]):
            self._bins[_bin(p)][0 if i < accepted else 1] += 1
        if self.learn_costs:
            self.verify.observe(positions, seconds)


def _bin(prob: float) -> int:
    return sum(prob >= edge for edge in CONF_BINS)


@dataclass
class Pick:
    """One iteration's choice: how many suffix tokens to verify (0: the helper's draft, or a plain
    step), both drafts' expected accepted tokens, and, when costs were weighed, both drafts'
    expected tokens per one-token step of cost."""

    take: int
    mine: float
    theirs: float
    model_length: int
    mine_rate: float | None = None
    theirs_rate: float | None = None


class HybridChoice:
    """Which draft an iteration of speculative decoding verifies: the suffix trees' (free: no
    helper forward) or the helper model's.

    The suffix draft's expected accepted length is the sum of the running products of its tokens'
    calibrated acceptance (`SuffixPolicy.acceptance`, learned from the iterations it drafted); the
    model draft's is a^1 + ... + a^L for the L tokens it would draft, ``a`` the run's acceptance of
    model drafts so far (a Beta mean, from the iterations the model drafted). Without costs the
    rule is Arctic Inference's: the suffix draft when its expected accepted length beats the model
    draft's. With them (the adaptive policy's: the helper's cost c per drafted token and the verify
    forward's T(k), `pick`'s ``costs``) the draft with more expected tokens per unit of cost wins,
    (1 + suffix's) / T(k + 1) against (1 + helper's) / (L c + T(L + 1)): on a CPU, where a helper
    forward costs half a target step, a suffix draft that expects fewer tokens can still be the
    faster one. Both read only the past: the choice never looks at this iteration's verdict, so
    greedy output stays the baseline's and sampling stays exact. ``learn_costs`` as
    `SuffixPolicy`'s (the cut of the suffix draft reads timings only when greedy)."""

    def __init__(self, cost_curve: list[float] | None, learn_costs: bool, cut: bool):
        self.suffix = SuffixPolicy(cost_curve, learn_costs)
        self.cut = cut  # cut the suffix draft to what pays for its verify forward (the adaptive policy)
        self._model = list(MODEL_PRIOR)

    @property
    def alpha(self) -> float:
        """The run's acceptance of a model draft token so far."""
        acc, rej = self._model
        return acc / (acc + rej)

    def model_expected(self, length: int) -> float:
        """Expected accepted tokens of a model draft of ``length`` tokens."""
        return expected_tokens(self.alpha, length) - 1.0 if length > 0 else 0.0

    def suffix_expected(self, probs: list[float]) -> float:
        survive, total = 1.0, 0.0
        for p in probs:
            survive *= self.suffix.acceptance(p)
            total += survive
        return total

    def pick(self, probs: list[float], model_length: int,
             costs: tuple[float, Callable[[int], float]] | None = None) -> Pick:
        """The choice for a suffix draft of branch frequencies ``probs`` and a model draft of
        ``model_length`` tokens (0: the helper would not draft; a plain step); ``costs``: the
        helper's c and the verify cost T(positions), to weigh tokens per unit of cost."""
        model = self.model_expected(model_length)
        if not probs:
            return Pick(0, 0.0, model, model_length)
        take = self.suffix.choose(probs) if self.cut else len(probs)
        mine = self.suffix_expected(probs[:take])
        if costs is None:
            return Pick(take if take and mine > model else 0, mine, model, model_length)
        c, verify = costs
        mine_rate = (1.0 + mine) / verify(take + 1)
        theirs_rate = (1.0 + model) / (model_length * c + verify(model_length + 1))
        return Pick(take if take and mine_rate > theirs_rate else 0, mine, model, model_length, mine_rate, theirs_rate)

    def observe_model(self, drafted: int, accepted: int) -> None:
        """A model draft's verdict: the tokens judged up to the first rejection."""
        if drafted:
            self._model[0] += accepted
            self._model[1] += 1 if accepted < drafted else 0


def hybrid_reason(pick: Pick, found) -> str:
    """Why the hybrid verified the suffix trees' draft, the helper's, or neither, in words (the
    record's draft_stop)."""
    helper = pick.model_length > 0  # else the helper would not draft: a plain step
    if found is None:
        return "the helper drafted: no suffix matched the tail" if helper else "no suffix matched the tail"
    where = f"a {found.match_len}-token match in {'this request' if found.source == 'request' else 'the memory'}"
    rates = ""
    if pick.mine_rate is not None and pick.theirs_rate is not None:  # weighed by cost
        rates = (f"; {pick.mine_rate:.2f} against {pick.theirs_rate:.2f} tokens per one-token step of cost"
                 if pick.take else f"; {pick.theirs_rate:.2f} against {pick.mine_rate:.2f} tokens per one-token "
                 "step of cost")
    if pick.take:
        theirs = f"the helper draft's {pick.theirs:.2f}" if helper else "a plain step's none"
        return f"the suffix trees drafted ({where}): {pick.mine:.2f} expected accepted tokens against {theirs}{rates}"
    if not helper:
        return f"the suffix draft ({where}) would not pay for its verify forward either"
    return (f"the helper drafted: its {pick.theirs:.2f} expected accepted tokens against the suffix draft's "
            f"{pick.mine:.2f} ({where}){rates}")


def joined_reason(stop: str, chose: str) -> str:
    """The adaptive policy's reason and the hybrid's choice, in one line (either may be empty)."""
    if not chose:
        return stop
    return f"{STOP_TEXT.get(stop, stop)}; {chose}" if stop else chose

