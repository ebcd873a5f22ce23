"""What a bench run was asked to do, as report.json's ``settings`` holds it (`BenchSettings`), and
each row's own settings (`RowSettings`); a sweep's (`SweepSettings`) and a batch bench's (`BatchSettings`).

Reports written before a key existed leave it out: such a field is UNSET (the key stays out when
the report is written back, so an old report.json reads back as written). Keys a report holds that
no field declares are passed over on reading.
"""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType

from decoders.records.codec import Record

#: How a row was paired with autoregressive decoding (`decoders.engine.PAIRINGS`).
Pairing = Literal["interleaved", "sequential"]


class RowSettings(Record, kw_only=True):
    """One row of the bench beyond autoregressive decoding: a method with its overrides and its
    draft (`decoders.bench.variants.Variant`), resolved against the family (`decoders.bench.drafts.Row`)."""

    label: str  # the row's label: "spec", "spec[tree 2x3]", "pld[branches 3] [llama.cpp]" in a run on several
    method: str  # the registered method it runs
    params: dict[str, int | float | str]  # the parameters it sets beyond the flags' (empty: none)
    draft: str | None  # the self-draft it names ("int4", "early-exit"); None: the family's helper
    layer: int | None  # the early-exit layer it names; None: the family's (or the bench's default)
    draft_source: str | None  # where its draft comes from ("early exit @ layer 1"); None: it drafts with no helper
    transformers_counterpart: str | None  # the reference's call measured beside it; None: it has none
    counterpart_is_closest: bool  # that call only comes closest (the reference verifies one linear draft)
    backend: str | UnsetType = UNSET  # the backend it ran on, in a run on several ("torch", "llamacpp")


class MemorySettings(Record, kw_only=True):
    """The suffix memory the bench's memory rows drafted from (``bench --suffix-memory PATH``), as
    read at the start: a datastore or a memory kept by ``run``; the bench never writes it."""

    path: str  # the file, as given
    responses: int  # the responses it held
    tokens: int  # their tokens


class BenchSettings(Record, kw_only=True):
    """What the run was asked to do: its rows, its budget, its parameters, its references and how
    each row was paired with autoregressive decoding. The fields are in report.json's key order."""

    # the side measured beside ours: "transformers", "llama-cpp-python"; "several" in a run on several
    # backends (each one's in ``references``); UNSET in reports from before a second reference
    reference: str | UnsetType = UNSET
    methods: list[str]  # every row's label, the autoregressive baseline's first
    max_new_tokens: int  # the token budget of every decode
    limit: int | None  # --limit: at most this many prompts; None: every prompt
    repeats: int  # how many times each prompt ran
    # only in the earliest reports, which wrote these beside ``decode_params`` (which holds them too):
    gamma: int | UnsetType = UNSET  # (earliest reports) speculative decoding's draft length
    num_pred: int | UnsetType = UNSET  # (earliest reports) prompt lookup's tokens proposed per match
    ngram: tuple[int, int] | UnsetType = UNSET  # (earliest reports) prompt lookup's [shortest, longest] n-gram
    block: int | UnsetType = UNSET  # (earliest reports) Jacobi decoding's block of tokens guessed at once
    jacobi_init: str | UnsetType = UNSET  # (earliest reports) how Jacobi decoding fills its first guess ("repeat")
    draft_policy: str | None | UnsetType = UNSET  # (earliest reports) "fixed" or "adaptive" draft length
    chat_template: bool  # whether each prompt went through the model's chat template
    mode: Literal["greedy"]  # the bench forces greedy decoding
    decode_params: dict[str, Any]  # every decoding parameter, as `DecodeParams.to_json` writes them
    early_exit_layer: int | None  # the layer an early-exit draft uses where neither row nor family names one
    record_overhead_every: int  # every this-many-th prompt also ran with record=True (0: never)
    # each row beyond autoregressive decoding, with its draft and counterpart; UNSET in reports from
    # before variants (one row per method then)
    variants: list[RowSettings] | UnsetType = UNSET
    # row label -> transformers' call measured beside it (None: none); in a run on several backends
    # only the torch rows' (every backend's is in ``counterparts``)
    transformers_counterparts: dict[str, str | None]
    # row label -> how it was paired with autoregressive decoding ("interleaved" or "sequential",
    # `decoders.engine.PAIRINGS`); UNSET in reports from before rows were paired (sequential then)
    pairing: dict[str, Pairing] | UnsetType = UNSET
    # a run on several backends (`decoders.bench.multi`) only:
    counterparts: dict[str, str | None] | UnsetType = UNSET  # row label -> its reference's call (None: none)
    backends: list[str] | UnsetType = UNSET  # the backends, in the order they ran: ["torch", "llamacpp"]
    references: dict[str, str] | UnsetType = UNSET  # backend -> the reference beside it
    # "session": the prompts ran in order as one session (`decoders.bench.session`); UNSET: each on its own
    workload: Literal["session"] | UnsetType = UNSET
    # the memory file the suffix rows started from (``--suffix-memory``); UNSET: an empty memory (and
    # in reports from before the bench could read one)
    suffix_memory: MemorySettings | UnsetType = UNSET

    @property
    def rows(self) -> list[RowSettings]:
        """Each row's settings; empty in a report from before variants."""
        return self.variants or []


class SweepSettings(Record, kw_only=True):
    """What a sweep was asked to do, as its report.json's ``settings`` holds it. The fields are in
    report.json's key order."""

    max_new_tokens: int  # the token budget of every decode
    limit: int | None  # --limit: at most this many prompts; None: every prompt
    repeats: int  # how many times each prompt ran
    # only in the earliest reports, which wrote these beside ``decode_params`` (which holds them too):
    gamma: int | UnsetType = UNSET  # (earliest reports) speculative decoding's draft length
    num_pred: int | UnsetType = UNSET  # (earliest reports) prompt lookup's tokens proposed per match
    ngram: tuple[int, int] | UnsetType = UNSET  # (earliest reports) prompt lookup's [shortest, longest] n-gram
    block: int | UnsetType = UNSET  # (earliest reports) Jacobi decoding's block of tokens guessed at once
    jacobi_init: str | UnsetType = UNSET  # (earliest reports) how Jacobi decoding fills its first guess ("repeat")
    draft_policy: str | None | UnsetType = UNSET  # (earliest reports) "fixed" or "adaptive" draft length
    # every decoding parameter every value's run had (the swept one aside), as `DecodeParams.to_json` writes them
    decode_params: dict[str, Any]
    # how each value's run was paired with autoregressive decoding; UNSET in reports from before
    # runs were paired (sequential then)
    pairing: Pairing | UnsetType = UNSET


class SyntheticGrid(Record, kw_only=True):
    """The cells to measure: every acceptance of ``alphas`` (one rate for every position) with
    every draft length of ``gammas``, each drafted token costing ``cost`` steps."""

    alphas: list[float]
    gammas: list[int]
    cost: float = 0.0
    seed: int = 0

    def cells(self) -> list[tuple[float, int]]:
        """α outer, γ inner."""
        return [(a, g) for a in self.alphas for g in self.gammas]


class BatchSettings(Record, kw_only=True):
    """What a batch bench was asked to do, as its report.json's ``settings`` holds it. The fields
    are in report.json's key order."""

    batches: list[int]  # the batch sizes, ascending
    methods: list[str]  # every row's label, autoregressive decoding's ("ar") first
    max_new_tokens: int  # the token budget of every sequence
    rounds: int  # how many rounds each row ran at each batch size
    k: int  # the longest draft of a row that names none
    prompts: int  # the prompts the rounds drew from
    # the draft length of a row that names none: "fixed" (up to k) or "adaptive" (the cost model's);
    # UNSET in reports from before the cost model (fixed then)
    draft_policy: str | UnsetType = UNSET
    # the synthetic grid measured beside the rows (`decoders.bench.batch_synthetic`); UNSET: none
    synthetic: SyntheticGrid | UnsetType = UNSET
    # the backends of a run on several (`--backends torch,llamacpp`), each a lane; UNSET: one backend
    backends: list[str] | UnsetType = UNSET
