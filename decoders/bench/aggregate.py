"""Per-prompt samples pooled into per-method figures, overall and per Spec-Bench task group.

Speedups follow Spec-Bench (`evaluation/speed.py`): mean per-prompt tokens/s of a method over
mean per-prompt tokens/s of autoregressive decoding on the same prompts; tau ("mean accepted
tokens") and acceptance are pooled, i.e. all emitted tokens over all target forwards.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from decoders.bench.common import BASELINE, mean, ratio, rounded
from decoders.bench.measure import Drafting, OursEntry, Sample, TheirsEntry, Theorem
from decoders.bench.prompts import group_rank


@dataclass(frozen=True)
class SideStats:
    """Pooled figures of one method on one side (ours or transformers') over a set of prompts."""

    n: int
    tokens: int
    ms_per_token: float | None
    tokens_per_s: float | None
    speedup: float | None
    tau: float | None
    speedup_spread: float | None = None  # two standard errors of the speedup (`speedup_spread`)
    judged: bool = False  # whether acceptance was measured (drafting methods of ours)
    acceptance: float | None = None  # accepted / judged draft tokens
    mean_acceptance_length: float | None = None  # vLLM's: 1 + accepted / drafts
    per_position_acceptance: list[float] | None = None  # vLLM's: accepted at position i / drafts
    identical: int | None = None  # outputs equal to the same side's AR
    all_identical: bool | None = None
    matches_transformers: int | None = None
    decode_step_ms: float | None = None
    verify_cost: float | None = None
    theorem: Theorem | None = None

    @classmethod
    def of(cls, entries: Sequence[OursEntry | TheirsEntry], ar_entries: Sequence[OursEntry | TheirsEntry]
           ) -> SideStats:
        """Speedup is Spec-Bench's; tau and acceptance are pooled over all iterations; ms/token
        is total time over total tokens."""
        tokens = sum(e.tokens for e in entries)
        wall = sum(e.wall_ms for e in entries)
        forwards = sum(e.target_forwards or 0 for e in entries)
        rate = mean(1000 * e.tokens / e.wall_ms for e in entries if e.wall_ms > 0)
        # the same formula for both: a rounded ms/token made AR against itself read 1.001x
        ar_rate = mean(1000 * e.tokens / e.wall_ms for e in ar_entries if e.wall_ms > 0)
        flags = [e.identical for e in entries if e.identical is not None]
        ours = [e for e in entries if isinstance(e, OursEntry)]
        drafting = [e.drafting for e in ours if e.drafting is not None]
        verified = sum(d.verified for d in drafting)
        matches = [e.matches_transformers for e in ours if e.matches_transformers is not None]
        return cls(
            n=len(entries),
            tokens=tokens,
            ms_per_token=rounded(wall / tokens if tokens else None),
            tokens_per_s=rounded(rate, 2),
            speedup=rounded(ratio(rate, ar_rate)),
            tau=rounded(tokens / forwards if forwards else None),
            speedup_spread=speedup_spread(entries, rounded(ratio(rate, ar_rate))),
            judged=bool(drafting),
            acceptance=rounded(sum(d.accepted for d in drafting) / verified if verified else None),
            **_vllm_acceptance(drafting),
            identical=sum(flags) if flags else None,
            all_identical=all(flags) if flags else None,
            matches_transformers=sum(matches) if matches else None,
            decode_step_ms=rounded(mean(e.decode_step_ms for e in ours)),
            verify_cost=rounded(mean(d.verify_cost for d in drafting)),
            theorem=_pooled_theorem([e.theorem for e in ours if e.theorem is not None]),
        )

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SideStats:
        plain = ("n", "tokens", "ms_per_token", "tokens_per_s", "speedup", "tau", "speedup_spread", "acceptance",
                 "mean_acceptance_length", "per_position_acceptance", "identical",
                 "all_identical", "matches_transformers", "decode_step_ms", "verify_cost")
        return cls(**{key: d.get(key) for key in plain}, judged="acceptance" in d,
                   theorem=Theorem.from_json(d) if "predicted_speedup" in d else None)

    @property
    def alpha_hat(self) -> float | None:
        return self.theorem.alpha_hat if self.theorem else None

    @property
    def c_hat(self) -> float | None:
        return self.theorem.c_hat if self.theorem else None

    @property
    def predicted_speedup(self) -> float | None:
        return self.theorem.predicted_speedup if self.theorem else None

    @property
    def predicted_speedup_cost_aware(self) -> float | None:
        return self.theorem.predicted_speedup_cost_aware if self.theorem else None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"n": self.n, "tokens": self.tokens, "ms_per_token": self.ms_per_token,
                             "tokens_per_s": self.tokens_per_s, "speedup": self.speedup, "tau": self.tau}
        if self.speedup_spread is not None:
            d["speedup_spread"] = self.speedup_spread
        if self.judged:
            d.update(acceptance=self.acceptance, mean_acceptance_length=self.mean_acceptance_length,
                     per_position_acceptance=self.per_position_acceptance)
        if self.identical is not None:
            d.update(identical=self.identical, all_identical=self.all_identical)
        for key in ("matches_transformers", "decode_step_ms", "verify_cost"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if self.theorem is not None:
            d.update(self.theorem.to_json())
        return d


def speedup_spread(entries: Sequence[OursEntry | TheirsEntry], speedup: float | None) -> float | None:
    """Two standard errors of a pooled speedup, as a ratio: the spread of the per-prompt speedups
    over the prompts (none for autoregressive decoding, 1.00x on every prompt by definition) and
    the timing noise measured on each prompt (`measure.timing_noise`: how far the machine's
    one-token step moved between the AR baseline and the run), added in quadrature. None where
    neither is known (one prompt without a probe), and for transformers' side, which has no probe."""
    if speedup is None or not all(isinstance(e, OursEntry) for e in entries):
        return None
    paired = [e.speedup for e in entries if e.speedup]
    between = statistics.stdev(paired) / statistics.fmean(paired) / len(paired) ** 0.5 if len(paired) > 1 else None
    noises = [e.timing_noise for e in entries if isinstance(e, OursEntry) and e.timing_noise is not None]
    timing = sum(x * x for x in noises) ** 0.5 / len(noises) if noises else None
    if timing is None and not between:  # no probe, and one prompt or AR's 1.00x on each: unknown, not zero
        return None
    return round(2 * speedup * ((between or 0.0) ** 2 + (timing or 0.0) ** 2) ** 0.5, 3)


def _vllm_acceptance(drafting: Sequence[Drafting]) -> dict[str, Any]:
    """Mean acceptance length and per-position acceptance pooled over runs: counts are summed
    before dividing, as vLLM does over a serving window."""
    counted = [d for d in drafting if d.drafts is not None and d.accepted_per_pos is not None]
    drafts = sum(d.drafts for d in counted)
    if not drafts:
        return {}
    per_pos = [0] * max(len(d.accepted_per_pos) for d in counted)
    for d in counted:
        for i, accepted in enumerate(d.accepted_per_pos):
            per_pos[i] += accepted
    return {"mean_acceptance_length": round(1 + sum(d.accepted for d in counted) / drafts, 3),
            "per_position_acceptance": [round(a / drafts, 3) for a in per_pos]}


def _pooled_theorem(theorems: list[Theorem]) -> Theorem | None:
    if not theorems:
        return None
    def pooled(key: str):
        values = [getattr(t, key) for t in theorems]
        return None if any(v is None for v in values) else rounded(mean(values))

    return Theorem(**{key: pooled(key) for key in Theorem.__dataclass_fields__})


@dataclass(frozen=True)
class MethodStats:
    """Ours, transformers' and the ratios ours/theirs for one method over a set of prompts."""

    ours: SideStats
    theirs: SideStats | None = None
    ratio_ms_per_token: float | None = None
    ratio_speedup: float | None = None
    record_runs: int = 0  # prompts where the method also ran with recording on
    record_overhead: float | None = None

    @classmethod
    def of(cls, samples: Sequence[Sample], method: str) -> MethodStats:
        with_ours = [s for s in samples if method in s.ours]
        ours = SideStats.of([s.ours[method] for s in with_ours], [s.ours[BASELINE] for s in with_ours])
        with_theirs = [s for s in with_ours if method in s.theirs]
        theirs = None
        if with_theirs:
            theirs = SideStats.of([s.theirs[method] for s in with_theirs], [s.theirs[BASELINE] for s in with_theirs])
        recorded = [s for s in samples if method in s.record_on]
        off = sum(s.ours[method].wall_ms for s in recorded)
        on = sum(s.record_on[method].wall_ms for s in recorded)
        return cls(ours=ours, theirs=theirs,
                   ratio_ms_per_token=rounded(ratio(ours.ms_per_token, theirs.ms_per_token)) if theirs else None,
                   ratio_speedup=rounded(ratio(ours.speedup, theirs.speedup)) if theirs else None,
                   record_runs=len(recorded), record_overhead=rounded(on / off - 1 if off else None, 4))

    @classmethod
    def from_json(cls, d: dict[str, Any], record_runs: int) -> MethodStats:
        """Back from report.json; ``record_runs`` is not stored there, the samples tell it."""
        theirs = d.get("theirs")
        return cls(ours=SideStats.from_json(d["ours"]), theirs=theirs and SideStats.from_json(theirs),
                   ratio_ms_per_token=d.get("ratio_ms_per_token"), ratio_speedup=d.get("ratio_speedup"),
                   record_runs=record_runs if "record_overhead" in d else 0, record_overhead=d.get("record_overhead"))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ours": self.ours.to_json()}
        if self.theirs is not None:
            d.update(theirs=self.theirs.to_json(), ratio_ms_per_token=self.ratio_ms_per_token,
                     ratio_speedup=self.ratio_speedup)
        if self.record_runs:
            d["record_overhead"] = self.record_overhead
        return d


@dataclass(frozen=True)
class Figures:
    """Every method's figures overall and per task group (groups in Spec-Bench's order)."""

    overall: dict[str, MethodStats]
    groups: dict[str, dict[str, MethodStats]]
    group_prompts: dict[str, int]  # distinct prompts per group

    @classmethod
    def from_json(cls, d: dict[str, Any], samples: Sequence[Sample]) -> Figures:
        """Back from report.json's overall, groups and group_prompts, with the report's samples."""
        def stats(per: dict[str, Any], group: str | None) -> dict[str, MethodStats]:
            runs = {m: sum(1 for s in samples if m in s.record_on and group in (None, s.group)) for m in per}
            return {m: MethodStats.from_json(figures, runs[m]) for m, figures in per.items()}

        return cls(overall=stats(d["overall"], None), groups={g: stats(per, g) for g, per in d["groups"].items()},
                   group_prompts=dict(d["group_prompts"]))

    def to_json(self) -> dict[str, Any]:
        return {"overall": {m: s.to_json() for m, s in self.overall.items()},
                "groups": {g: {m: s.to_json() for m, s in per.items()} for g, per in self.groups.items()},
                "group_prompts": dict(self.group_prompts)}


def aggregate(samples: Sequence[Sample], methods: Sequence[str]) -> Figures:
    """Overall and per-group figures for every method."""
    groups: dict[str, list[Sample]] = {}
    for sample in samples:
        groups.setdefault(sample.group, []).append(sample)
    ordered = sorted(groups, key=group_rank)
    return Figures(
        overall={m: MethodStats.of(samples, m) for m in methods},
        groups={g: {m: MethodStats.of(groups[g], m) for m in methods} for g in ordered},
        group_prompts={g: len({s.question_id for s in groups[g]}) for g in ordered},
    )
