"""What one prompt's runs contribute to the report, as report.json holds them: our entries
(`OursEntry`, with the drafting figures `Drafting` and Theorem 3.8's `Theorem` where a run has
them), transformers' (`TheirsEntry`), and every run on one prompt (`Sample`). Measured by
`decoders.bench.measure.PromptMeasurer`, pooled by `decoders.bench.aggregate`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from decoders.analysis.stats import DecodeStats
from decoders.analysis.summary import Summary, first_divergence
from decoders.analysis.timing import paired_drift
from decoders.bench.common import BASELINE
from decoders.bench.reference import HFRun
from decoders.records.codec import Record
from decoders.records.run import Run, RunResult


class Theorem(Record, kw_only=True):
    """Theorem 3.8's inputs and predictions for speculative decoding (Leviathan et al. 2023)."""

    alpha_hat: float | None = None
    c_hat: float | None = None
    predicted_speedup: float | None = None
    predicted_speedup_cost_aware: float | None = None
    # the theorem's premise, a full draft of gamma every decode iteration: the run's gamma, the mean
    # length it drafted and its plain (undrafted) steps; None in reports from before they were kept
    gamma: int | float | None = None
    mean_drafted: float | None = None
    plain_steps: int | float | None = None

    def premise_broken(self) -> str | None:
        """Why the theorem does not apply to this row, or None where it does (or is not known)."""
        if self.plain_steps:
            return (f"{self.plain_steps:g} plain steps a run (the adaptive policy drafted nothing there), "
                    "outside the theorem's premise of a full draft every iteration")
        if self.gamma and self.mean_drafted is not None and self.mean_drafted < PREMISE_SHARE * self.gamma:
            return (f"drafts of {self.mean_drafted:.2f} tokens on average for γ {self.gamma:g}: the draft length "
                    "varied, outside the theorem's premise of a fixed γ")
        return None

    @classmethod
    def view(cls, record: Any) -> Theorem | None:
        """The theorem's fields of a flat record (an entry, a side's figures); None where it has none."""
        if isinstance(record.alpha_hat, UnsetType):
            return None
        return cls(**{key: getattr(record, key) for key in cls.__struct_fields__})


#: A row drafting at least this share of gamma on average keeps the theorem's fixed-length premise
#: (the last draft of a run may be cut short by the token budget).
PREMISE_SHARE = 0.9


class Drafting(Record, kw_only=True):
    """What a drafting method's run did with its drafts, in the engine's `DecodeStats` terms
    (vLLM's names: a draft is one iteration that proposed tokens)."""

    accepted: int
    verified: int  # drafts the target judged (drafts after the first rejection are never judged)
    drafted: int | None  # draft tokens proposed
    accept_rate: float | None  # accepted / verified
    verify_cost: float | None  # one-token forwards a verify forward costs
    drafts: int | None = None  # iterations that proposed tokens
    accepted_per_pos: list[int] | None = None  # accepted tokens at each draft position
    mean_acceptance_length: float | None = None  # 1 + accepted / drafts
    per_position_acceptance: list[float] | None = None  # accepted_per_pos / drafts

    @classmethod
    def of(cls, stats: DecodeStats, summary: Summary) -> Drafting:
        return cls(accepted=stats.accepted, verified=stats.judged, drafted=stats.draft_tokens,
                   accept_rate=stats.acceptance, verify_cost=summary.verify_cost, drafts=stats.drafts,
                   accepted_per_pos=list(stats.accepted_per_pos),
                   mean_acceptance_length=stats.mean_acceptance_length,
                   per_position_acceptance=stats.per_position_acceptance)


class OursEntry(Record, kw_only=True, omit_defaults=True):
    """What one engine run contributes to the report, as report.json holds it: flat, the drafting
    figures (every method but autoregressive) and Theorem 3.8's (speculative decoding) left out
    (UNSET) where the run has none; ``speedup`` and the comparison with transformers are filled
    in once the prompt's other runs are known, and left out while None."""

    method: str = ""  # a report that does not name it: the row the entry is in (`Sample`)
    label: str
    tokens: int
    wall_ms: float
    ms_per_token: float
    target_forwards: int
    tau: float | None
    finish: str
    identical: bool | None
    first_divergence: int | None
    decode_step_ms: float | None
    ids: list[int]
    # `Drafting`'s fields
    accepted: int | UnsetType = UNSET
    verified: int | UnsetType = UNSET
    drafted: int | None | UnsetType = UNSET
    accept_rate: float | None | UnsetType = UNSET
    verify_cost: float | None | UnsetType = UNSET
    drafts: int | None | UnsetType = UNSET
    accepted_per_pos: list[int] | None | UnsetType = UNSET
    mean_acceptance_length: float | None | UnsetType = UNSET
    per_position_acceptance: list[float] | None | UnsetType = UNSET
    # `Theorem`'s fields (speculative decoding only)
    gamma: int | float | None | UnsetType = UNSET
    alpha_hat: float | None | UnsetType = UNSET
    c_hat: float | None | UnsetType = UNSET
    predicted_speedup: float | None | UnsetType = UNSET
    predicted_speedup_cost_aware: float | None | UnsetType = UNSET
    mean_drafted: float | None | UnsetType = UNSET
    plain_steps: int | float | None | UnsetType = UNSET
    speedup: float | None = None
    matches_transformers: bool | None = None  # None: transformers has no counterpart
    transformers_divergence: int | None | UnsetType = UNSET
    timing_noise: float | None = None  # relative: how far the machine's step moved on this prompt (`timing_noise`)
    decode_ms_per_token: float | None = None  # after the first token: the decode loop without the prefill

    @classmethod
    def of_run(cls, result: RunResult) -> OursEntry:
        """The method run of an engine result: its summary, and its acceptance counted again
        from the iterations (the summary keeps rates, the bench pools counts)."""
        run, s = result.method, result.summary
        figures: dict[str, Any] = {}
        if s.drafted is not None:  # a drafting method (the summary leaves these out for plain decoding)
            figures.update(msgspec.structs.asdict(Drafting.of(DecodeStats.of(run.iters), s)))
        if "predicted_speedup" in s.extras:  # a method that Theorem 3.8 predicts
            figures.update({key: s.extras.get(key) for key in Theorem.__struct_fields__})
        return cls(**_timing(run), target_forwards=s.target_forwards, tau=s.tau, identical=s.identical,
                   first_divergence=s.first_divergence, timing_noise=timing_noise(result), **figures)

    @classmethod
    def of_baseline(cls, result: RunResult) -> OursEntry:
        """Our autoregressive figures from the baseline decode the engine ran before the method."""
        base = result.baseline
        forwards = base.n_forward.get("main", 0)
        return cls(**_timing(base), target_forwards=forwards,
                   tau=round(len(base.ids) / forwards, 3) if forwards else None, identical=True,
                   first_divergence=None, timing_noise=timing_noise(result))

    @property
    def drafting(self) -> Drafting | None:
        if isinstance(self.verified, UnsetType):
            return None
        return Drafting(**{key: getattr(self, key) for key in Drafting.__struct_fields__})

    @property
    def theorem(self) -> Theorem | None:
        return Theorem.view(self)

    def compare(self, ar_ms_per_token: float, theirs: TheirsEntry | None) -> None:
        """Speedup over our AR on the same prompt, and the output against transformers'."""
        self.speedup = round(ar_ms_per_token / self.ms_per_token, 4)
        if theirs is not None:
            self.matches_transformers = self.ids == theirs.ids
            self.transformers_divergence = first_divergence(theirs.ids, self.ids)


def timing_noise(result: RunResult) -> float | None:
    """How much the same autoregressive decode could differ from itself on this prompt, relative (one
    standard error). Interleaved: the pair's own spread (`decoders.analysis.timing.paired_speedup`,
    end to end where known, as the bench's speedups are: the step-to-step jitter, the prefills'
    difference and the machine's change over one turn). Sequential: the one-token steps timed right
    after the run against the baseline's own last steps (`decoders.analysis.timing.Drift`), their
    ratio's distance from 1 and its standard error, together. None when neither was measured."""
    s = result.summary
    if s.pairing == "interleaved":
        for speedup, spread in ((s.speedup_wall, s.speedup_wall_spread), (s.speedup_decode, s.speedup_spread)):
            if speedup and spread is not None:
                return round(spread / (2 * speedup), 4)
        return None
    if not s.probe_ms:
        return None
    drift, _ = paired_drift(result.baseline, result.method, s.probe_ms)
    return round(((drift.factor - 1.0) ** 2 + drift.rel_error ** 2) ** 0.5, 4)


def _timing(run: Run) -> dict[str, Any]:
    tokens, wall = len(run.ids), run.time_ms["wall"]
    assert wall is not None  # every run times its wall clock
    decode = run.time_ms.get("decode")
    return {"method": run.method, "label": run.label, "tokens": tokens, "wall_ms": wall,
            "ms_per_token": round(wall / max(tokens, 1), 3), "finish": run.finish,
            "decode_step_ms": run.time_ms.get("main_fwd_mean"), "ids": run.ids,
            "decode_ms_per_token": round(decode / (tokens - 1), 3) if decode is not None and tokens > 1 else None}


class TheirsEntry(Record, kw_only=True, omit_defaults=True):
    """One transformers run (`HFRun`'s fields, with its tokens, ms/token and tau), compared with
    transformers' own greedy output (left out for the greedy run itself)."""

    method: str  # ar | pld | spec (our name for the counterpart)
    label: str
    ids: list[int]
    wall_ms: float
    target_forwards: int
    draft_forwards: int
    finish: str
    tokens: int
    ms_per_token: float
    tau: float | None
    identical: bool | None = None  # None: this is the greedy run itself
    first_divergence: int | None | UnsetType = UNSET
    speedup: float | None = None
    first_token_ms: float | None = None  # where the loop yields its tokens (llama-cpp-python's)
    decode_ms_per_token: float | None = None  # after the first token, where it is known

    @classmethod
    def of(cls, run: HFRun, ar_ids: list[int] | None) -> TheirsEntry:
        compared: dict[str, Any] = {}
        if ar_ids is not None:
            compared = {"identical": run.ids == ar_ids, "first_divergence": first_divergence(ar_ids, run.ids)}
        tokens, first = len(run.ids), run.first_token_ms
        decode = round((run.wall_ms - first) / (tokens - 1), 3) if first is not None and tokens > 1 else None
        return cls(**dataclasses.asdict(run), tokens=tokens, ms_per_token=round(run.ms_per_token, 3),
                   tau=None if run.tau is None else round(run.tau, 3), decode_ms_per_token=decode, **compared)


class Sample(Record):
    """Every run on one prompt: ours, transformers', and ours with recording on."""

    question_id: Any
    category: str
    group: str
    repeat: int
    prompt_tokens: int
    ours: dict[str, OursEntry] = msgspec.field(default_factory=dict)
    theirs: dict[str, TheirsEntry] = msgspec.field(default_factory=dict)
    record_on: dict[str, OursEntry] = msgspec.field(default_factory=dict)
    text: str = ""
    # in a run on several backends (`decoders.bench.multi`): the one these runs are on (else left out)
    backend: str | UnsetType = UNSET
    # how our rows were paired with autoregressive decoding (`decoders.engine.PAIRINGS`): "interleaved",
    # each row with its own baseline (in ``baselines``), or "sequential", every row against the
    # prompt's one baseline (``ours[BASELINE]``); left out in reports from before rows were paired
    pairing: str | UnsetType = UNSET
    # each row's own autoregressive baseline, decoded beside it step by step (interleaved pairing;
    # left out where the rows were paired sequentially)
    baselines: dict[str, OursEntry] | UnsetType = UNSET
    # a run of one session (`decoders.bench.session`): this prompt's place in it, 0 first (left out in a run
    # of separate prompts, as the next two)
    position: int | UnsetType = UNSET
    # its turn: 1, or 2 for a multi-turn question's second (after the first turn's answer)
    turn: int | UnsetType = UNSET
    # the responses each row that drafts from a memory had in its own when it ran here, by row label
    memory: dict[str, int] | UnsetType = UNSET

    def __post_init__(self) -> None:
        for per in (self.ours, self.record_on):  # a report that does not name an entry's method: its row's
            for method, entry in per.items():
                entry.method = entry.method or method
        for entry in self.own_baselines.values():
            entry.method = entry.method or BASELINE

    @property
    def own_baselines(self) -> dict[str, OursEntry]:
        return {} if isinstance(self.baselines, UnsetType) else self.baselines

    def baseline_of(self, label: str) -> OursEntry:
        """The autoregressive run ``label``'s speedup is over: its own (interleaved), else the prompt's."""
        return self.own_baselines.get(label) or self.ours[BASELINE]

    def compare(self) -> None:
        """Speedups over each side's own AR (each row of ours over its own baseline where it has one),
        and our outputs against transformers'."""
        theirs_ar = self.theirs[BASELINE].ms_per_token
        for method, entry in self.ours.items():
            entry.compare(self.baseline_of(method).ms_per_token, self.theirs.get(method))
        for them in self.theirs.values():
            them.speedup = round(theirs_ar / them.ms_per_token, 4)
