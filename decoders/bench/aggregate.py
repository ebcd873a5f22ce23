"""Per-prompt samples pooled into per-method figures, overall and per Spec-Bench task group.

Speedups follow Spec-Bench (`evaluation/speed.py`): mean per-prompt tokens/s of a method over
mean per-prompt tokens/s of autoregressive decoding on the same prompts (each row's own baseline,
decoded beside it, where the rows were paired interleaved: `Sample.baseline_of`); tau ("mean accepted
tokens") and acceptance are pooled, i.e. all emitted tokens over all target forwards.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

import msgspec
from msgspec import UNSET, UnsetType

from decoders.bench.common import BASELINE, known, mean, ratio, rounded
from decoders.bench.entries import Drafting, OursEntry, Sample, TheirsEntry, Theorem
from decoders.bench.prompts import group_rank
from decoders.records.codec import Record


class SideStats(Record, kw_only=True, omit_defaults=True):
    """Pooled figures of one method on one side (ours or transformers') over a set of prompts, as
    report.json holds them: acceptance only where it was judged (drafting methods of ours) and
    Theorem 3.8's figures only where the method predicts them (UNSET: left out), None figures
    left out."""

    n: int
    tokens: int
    ms_per_token: float | None
    tokens_per_s: float | None
    speedup: float | None
    tau: float | None
    speedup_spread: float | None = None  # two standard errors of the speedup (`speedup_spread`)
    acceptance: float | None | UnsetType = UNSET  # accepted / judged draft tokens
    mean_acceptance_length: float | None | UnsetType = UNSET  # vLLM's: 1 + accepted / drafts
    per_position_acceptance: list[float] | None | UnsetType = UNSET  # vLLM's: accepted at position i / drafts
    identical: int | None = None  # outputs equal to the same side's AR
    all_identical: bool | None = None
    matches_transformers: int | None = None
    decode_step_ms: float | None = None
    # the time after the first token over the tokens after it, pooled (the decode loop without the
    # prefill); None where a run did not time its first token (transformers' generate())
    decode_ms_per_token: float | None = None
    verify_cost: float | None = None
    # `Theorem`'s fields, pooled
    alpha_hat: float | None | UnsetType = UNSET
    c_hat: float | None | UnsetType = UNSET
    predicted_speedup: float | None | UnsetType = UNSET
    predicted_speedup_cost_aware: float | None | UnsetType = UNSET
    gamma: int | float | None | UnsetType = UNSET
    mean_drafted: float | None | UnsetType = UNSET
    plain_steps: int | float | None | UnsetType = UNSET

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
        drafting = [d for d in (e.drafting for e in ours) if d is not None]
        verified = sum(d.verified for d in drafting)
        matches = [e.matches_transformers for e in ours if e.matches_transformers is not None]
        judged: dict[str, Any] = {}
        if drafting:
            judged = {"acceptance": rounded(sum(d.accepted for d in drafting) / verified if verified else None),
                      "mean_acceptance_length": None, "per_position_acceptance": None, **_vllm_acceptance(drafting)}
        theorem = _pooled_theorem([t for t in (e.theorem for e in ours) if t is not None])
        return cls(
            n=len(entries),
            tokens=tokens,
            ms_per_token=rounded(wall / tokens if tokens else None),
            tokens_per_s=rounded(rate, 2),
            speedup=rounded(ratio(rate, ar_rate)),
            tau=rounded(tokens / forwards if forwards else None),
            speedup_spread=speedup_spread(entries, rounded(ratio(rate, ar_rate))),
            **judged,
            identical=sum(flags) if flags else None,
            all_identical=all(flags) if flags else None,
            matches_transformers=sum(matches) if matches else None,
            decode_step_ms=rounded(mean(e.decode_step_ms for e in ours)),
            decode_ms_per_token=_pooled_decode(entries),
            verify_cost=rounded(mean(d.verify_cost for d in drafting)),
            **(msgspec.structs.asdict(theorem) if theorem is not None else {}),
        )

    @property
    def judged(self) -> bool:
        """Whether acceptance was measured (drafting methods of ours)."""
        return not isinstance(self.acceptance, UnsetType)

    @property
    def theorem(self) -> Theorem | None:
        return Theorem.view(self)


def _pooled_decode(entries: Sequence[OursEntry | TheirsEntry]) -> float | None:
    """Decode ms/token over every run: their time after the first token over their tokens after it."""
    timed = [e for e in entries if e.tokens > 1]
    if not timed or any(e.decode_ms_per_token is None for e in timed):
        return None
    tokens = sum(e.tokens - 1 for e in timed)
    return rounded(sum((e.decode_ms_per_token or 0.0) * (e.tokens - 1) for e in timed) / tokens)


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
    counted = [(d, d.drafts, d.accepted_per_pos) for d in drafting]
    counts = [(d, n, per) for d, n, per in counted if n is not None and per is not None]
    drafts = sum(n for _, n, _ in counts)
    if not drafts:
        return {}
    per_pos = [0] * max(len(per) for _, _, per in counts)
    for _, _, per in counts:
        for i, accepted in enumerate(per):
            per_pos[i] += accepted
    return {"mean_acceptance_length": round(1 + sum(d.accepted for d, _, _ in counts) / drafts, 3),
            "per_position_acceptance": [round(a / drafts, 3) for a in per_pos]}


def _pooled_theorem(theorems: list[Theorem]) -> Theorem | None:
    if not theorems:
        return None

    def pooled(key: str) -> float | None:
        values = [getattr(t, key) for t in theorems]
        return None if any(v is None for v in values) else rounded(mean(values))

    return Theorem(**{key: pooled(key) for key in Theorem.__struct_fields__})


class MethodStats(Record, kw_only=True, omit_defaults=True):
    """Ours, transformers' and the ratios ours/theirs for one method over a set of prompts, as
    report.json holds them: the ratios only beside transformers' figures, the recording overhead
    only where the method also ran with recording on (UNSET: left out)."""

    ours: SideStats
    theirs: SideStats | None = None
    ratio_ms_per_token: float | None | UnsetType = UNSET
    ratio_speedup: float | None | UnsetType = UNSET
    record_overhead: float | None | UnsetType = UNSET

    @classmethod
    def of(cls, samples: Sequence[Sample], method: str) -> MethodStats:
        with_ours = [s for s in samples if method in s.ours]
        # each row over its own baseline (interleaved pairing), else over the prompt's (sequential)
        ours = SideStats.of([s.ours[method] for s in with_ours], [s.baseline_of(method) for s in with_ours])
        with_theirs = [s for s in with_ours if method in s.theirs]
        figures: dict[str, Any] = {}
        if with_theirs:
            theirs = SideStats.of([s.theirs[method] for s in with_theirs], [s.theirs[BASELINE] for s in with_theirs])
            figures.update(theirs=theirs, ratio_ms_per_token=rounded(ratio(ours.ms_per_token, theirs.ms_per_token)),
                           ratio_speedup=rounded(ratio(ours.speedup, theirs.speedup)))
        recorded = [s for s in samples if method in s.record_on]
        if recorded:
            off = sum(s.ours[method].wall_ms for s in recorded)
            on = sum(s.record_on[method].wall_ms for s in recorded)
            figures["record_overhead"] = rounded(on / off - 1 if off else None, 4)
        return cls(ours=ours, **figures)

    @property
    def overhead(self) -> float | None:
        """The recording overhead; None where it was not measured."""
        return known(self.record_overhead)


class Figures(msgspec.Struct, frozen=True):
    """Every method's figures overall and per task group (groups in Spec-Bench's order); a bench
    report holds these three beside its other fields."""

    overall: dict[str, MethodStats]
    groups: dict[str, dict[str, MethodStats]]
    group_prompts: dict[str, int]  # distinct prompts per group


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
