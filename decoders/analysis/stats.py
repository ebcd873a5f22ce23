"""Acceptance statistics from iteration records: one accumulator for the live figures, the
summary and the bench.

The names follow vLLM's speculative-decoding metrics (`spec_decode/metrics.py`) so that figures
line up with other tools: a *draft* is one iteration that proposed tokens, *draft tokens* are the
tokens proposed, the *mean acceptance length* is 1 + accepted / drafts (tokens one verify
forward yields), and the *per-position acceptance* is, for each draft position i, the share of
drafts whose token i was accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from decoders.records.kinds import KIND_ACCEPTED, STATUS_ACCEPTED, STATUS_REJECTED

if TYPE_CHECKING:
    from decoders.records.run import Iteration


def depth_of(rows, i: int) -> int:
    """Depth of draft row ``i`` (0 for a row attached to the sequence), following parents."""
    depth = 0
    while rows[i].parent >= 0:
        i = rows[i].parent
        depth += 1
    return depth


@dataclass
class DecodeStats:
    """Counts over the iterations observed so far; every figure is derived from them."""

    tokens: int = 0  # emitted tokens
    iterations: int = 0  # target forwards (one per iteration)
    drafts: int = 0  # iterations that proposed at least one token
    draft_tokens: int = 0  # tokens proposed
    accepted: int = 0  # proposed tokens the target accepted
    judged: int = 0  # proposed tokens the target judged (accepted or rejected)
    accepted_per_pos: list[int] = field(default_factory=list)
    drafted_per_pos: list[int] = field(default_factory=list)  # drafts with a token at position i
    judged_per_pos: list[int] = field(default_factory=list)  # drafts whose position i was judged
    accept_lengths: list[int] = field(default_factory=list)  # [n]: drafts that had n tokens accepted
    betas: list[float] = field(default_factory=list)  # sum(min(p, q)) at each verified position

    @classmethod
    def of(cls, iterations: Iterable[Iteration]) -> DecodeStats:
        stats = cls()
        for it in iterations:
            stats.observe(it)
        return stats

    def observe(self, it: Iteration) -> None:
        self.tokens += len(it.emit)
        self.iterations += 1
        self.betas.extend(it.beta)
        if not it.draft:
            return
        self.drafts += 1
        self.draft_tokens += len(it.draft)
        self.judged += it.n_judged
        depths = [depth_of(it.draft, i) for i in range(len(it.draft))]
        while len(self.drafted_per_pos) <= max(depths):
            for counts in (self.drafted_per_pos, self.accepted_per_pos, self.judged_per_pos):
                counts.append(0)
        judged = {d for row, d in zip(it.draft, depths, strict=False)
                  if row.status in (STATUS_ACCEPTED, STATUS_REJECTED)}
        for depth in set(depths):  # a position counts once per draft that reached it
            self.drafted_per_pos[depth] += 1
            self.judged_per_pos[depth] += depth in judged
        # accepted drafts that a stop token or the budget cut off were never emitted: not counted
        emitted = sum(1 for e in it.emit if e.kind == KIND_ACCEPTED)
        n = 0
        for row, depth in zip(it.draft, depths, strict=False):
            if row.status == STATUS_ACCEPTED and depth < emitted:
                n += 1
                self.accepted_per_pos[depth] += 1
        self.accepted += n
        while len(self.accept_lengths) <= n:
            self.accept_lengths.append(0)
        self.accept_lengths[n] += 1

    @property
    def tau(self) -> float | None:
        """Tokens per target forward."""
        return round(self.tokens / self.iterations, 3) if self.iterations else None

    @property
    def acceptance(self) -> float | None:
        """Share of the judged draft tokens that were accepted (tokens after a rejection are never
        judged, so this is the per-token acceptance rate that theory calls alpha for greedy runs)."""
        return round(self.accepted / self.judged, 3) if self.judged else None

    @property
    def draft_acceptance_rate(self) -> float | None:
        """vLLM's draft acceptance rate: accepted over proposed tokens."""
        return round(self.accepted / self.draft_tokens, 3) if self.draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """vLLM's mean acceptance length: 1 + accepted tokens per draft."""
        return round(1 + self.accepted / self.drafts, 3) if self.drafts else None

    @property
    def per_position_acceptance(self) -> list[float]:
        """vLLM's per-position acceptance: for each draft position, accepted there over drafts."""
        return [round(a / self.drafts, 3) for a in self.accepted_per_pos] if self.drafts else []

    @property
    def per_position_acceptance_conditional(self) -> list[float | None]:
        """For each draft position, accepted there over drafts whose position was judged (every
        earlier position accepted): the acceptance rate at that depth, given it was reached."""
        pairs = zip(self.accepted_per_pos, self.judged_per_pos, strict=False)
        return [round(a / j, 3) if j else None for a, j in pairs]

    @property
    def alpha_hat(self) -> float | None:
        """Mean of sum(min(p, q)) over verified positions: the acceptance rate theory predicts."""
        return sum(self.betas) / len(self.betas) if self.betas else None
