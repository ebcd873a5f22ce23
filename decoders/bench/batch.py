"""The batch bench (`tui-decode bench --batch 1,2,4`): each method decoding B prompts together
(`decoders.methods.batch.chain`) beside autoregressive decoding at the same batch size,
interleaved (in each round: autoregressive, then each method, on the same B prompts), with the
verify-cost surface T(B, k) measured in the same run (`decoders.bench.batch_surface`).

Per row and batch size: throughput (tokens per second over all sequences), per-sequence latency
(mean seconds until a sequence was done), the speedup over autoregressive decoding at that batch
size with its spread (two standard errors over the rounds), and the batch size where the method
stops paying (its crossover). Each sequence's output is compared with its batch-1 autoregressive
output; where they part, the position and the batch-1 top-2 margin there are reported (a margin
near float32 noise is a near tie the batched kernels broke the other way).

A run is one lane (`decoders.bench.batch_lane.BatchLane`); with ``--backends torch,llamacpp`` one
lane per backend (`decoders.bench.batch_multi`), in one report.

Saved as report.json of kind "batch" (schema `REPORT_SCHEMA`) beside report.md
(`decoders.bench.batch_report`); reports of the other kinds read back as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from decoders.bench.batch_identity import Divergence
from decoders.bench.batch_surface import WIDTHS
from decoders.bench.batch_synthetic import SyntheticBatchRow, SyntheticGrid
from decoders.bench.machine import BatchMachine
from decoders.bench.settings import BatchSettings
from decoders.bench.suite import REPORT_SCHEMA, Agreement
from decoders.core.errors import DecodeError
from decoders.methods.batch.chain import BATCH_METHODS, MAX_BATCH
from decoders.methods.batch.suffix import SuffixShape
from decoders.records.codec import Record
from decoders.records.family_info import FamilyInfo

if TYPE_CHECKING:
    from decoders.backends.capabilities import BatchedModel

#: Share of the available memory a batch may plan to use (the rest: the model, Python, the OS).
MEMORY_SHARE = 0.5


def parse_batches(text: str) -> list[int]:
    """``"1,2,4"`` as ascending distinct batch sizes, each 1..`MAX_BATCH`; DecodeError in one line."""
    sizes = []
    for part in text.split(","):
        part = part.strip()
        if not part.lstrip("-").isdigit():
            raise DecodeError(f"--batch takes comma-separated batch sizes such as 1,2,4, got {text!r}")
        size = int(part)
        if not 1 <= size <= MAX_BATCH:
            raise DecodeError(f"batch size must be 1..{MAX_BATCH}, got {size}; give --batch sizes in that range "
                              "(e.g. 1,2,4,8)")
        sizes.append(size)
    return sorted(set(sizes))


def check_methods(methods: Sequence[str]) -> list[str]:
    """The rows a batch bench runs besides autoregressive decoding; DecodeError for one that does
    not decode at batch > 1."""
    rows = [m for m in dict.fromkeys(methods) if m != "ar"]
    odd = [m for m in rows if m not in BATCH_METHODS]
    if odd:
        raise DecodeError(f"--batch runs {', '.join(BATCH_METHODS)} only so far, not {', '.join(odd)}; "
                          f"give --methods {','.join(BATCH_METHODS)}")
    return rows


class RowSpec(Record, kw_only=True):
    """A row of the batch bench: ``method`` drafting up to ``k`` tokens, its draft length fixed or
    from the cost model (`decoders.methods.batch.adaptive`), under ``label``."""

    label: str
    method: str
    k: int
    policy: str = "fixed"


#: The parameters a batch bench variant may set (``--variants 'pld[num_pred 2, draft_policy fixed]'``;
#: suffix decoding's k is its ``suffix_max``).
BATCH_VARIANT_PARAMS = ("num_pred", "suffix_max", "draft_policy")


def row_specs(methods: Sequence[str], k: int, policy: str, variants: Sequence[Any] | None = None,
              lengths: dict[str, int] | None = None) -> list[RowSpec]:
    """The rows besides autoregressive decoding: one per method of ``methods`` at the run's ``k``
    (``lengths``: another k for a method, e.g. suffix decoding's ``--suffix-max``) and ``policy``,
    or one per ``--variants`` item (`decoders.bench.variants.Variant`); DecodeError for a method
    that does not decode at batch > 1 or a variant item the batch bench cannot vary."""
    lengths = lengths or {}
    if variants is None:
        return [RowSpec(label=m, method=m, k=lengths.get(m, k), policy=policy) for m in check_methods(methods)]
    rows = []
    for variant in variants:
        check_methods([variant.method])
        values = dict(variant.overrides)
        odd = [name for name in values if name not in BATCH_VARIANT_PARAMS]
        if variant.draft is not None:
            raise DecodeError("--batch drafts spec with the loaded --helper, --self-draft int4 or --self-draft head, "
                              f"not with a variant's draft ({variant.label}); give --methods ar,spec and --self-draft "
                              f"{variant.draft}")
        if odd:
            raise DecodeError(f"--batch varies only {', '.join(BATCH_VARIANT_PARAMS)}, not "
                              f"{', '.join(odd)} in {variant.label}; give e.g. "
                              "--variants 'pld[num_pred 2, draft_policy fixed],pld'")
        default = lengths.get(variant.method, k)
        length = values.get("suffix_max" if variant.method == "suffix" else "num_pred", default)
        rows.append(RowSpec(label=variant.label, method=variant.method, k=int(length),
                            policy=str(values.get("draft_policy", policy))))
    return rows


def memory_needed(model, batch: int, prompt_tokens: int, max_new: int, width: int, vocab: int) -> int:
    """Bytes a batch of ``batch`` rows may need at most: its cache (the prompt and every step's
    ``width`` slots before a compaction halves the holes) and a step's logits."""
    from decoders.backends.batched import kv_bytes_per_slot

    slots = prompt_tokens + 2 * max_new * width
    return batch * (slots * kv_bytes_per_slot(model) + 2 * width * vocab * 4)


def check_memory(model, batches: Sequence[int], prompt_tokens: int, max_new: int, width: int, vocab: int,
                 available: int | None) -> None:
    """DecodeError in one line for a batch size above what memory allows, saying how much it needs."""
    from decoders.core.host_memory import format_bytes

    if available is None:
        return
    for size in batches:
        need = memory_needed(model, size, prompt_tokens, max_new, width, vocab)
        if need > MEMORY_SHARE * available:
            raise DecodeError(f"batch size {size} needs about {format_bytes(need)} for its cache and logits, more than "
                              f"half of the {format_bytes(available)} available; give smaller --batch sizes or "
                              "lower --max-new-tokens")


def _llamacpp_model(family):
    """The llama.cpp model behind ``family``'s main backend (None: not llama.cpp)."""
    from decoders.backends.llamacpp import LlamaCppBackend

    return family.main.model if isinstance(family.main, LlamaCppBackend) else None


def check_batches(family, batches: Sequence[int], prompt_tokens: int, max_new: int, width: int,
                  available: int | None, spec: bool = False) -> None:
    """DecodeError in one line for a batch size ``family``'s backend cannot hold: above what memory
    allows on either backend (saying how much it needs); on llama.cpp also above ``n_seq_max``'s
    bound or a row longer than the model's context, and with ``spec`` (a spec row runs) the GGUF
    helper's batched cache counted beside the target's."""
    llama = _llamacpp_model(family)
    if llama is not None:
        from decoders.backends.llamacpp_batched import check_batch, positions_per_row
        from decoders.bench.batch_spec import llamacpp_helper

        check_batch(llama, batches, positions_per_row(prompt_tokens, max_new, width), width, available, MEMORY_SHARE,
                    draft=llamacpp_helper(family) if spec else None)
    elif family.main_model is not None:
        check_memory(family.main_model, batches, prompt_tokens, max_new, width, family.vocab_size, available)


def batch_maker(family, positions: int) -> Callable[[int], BatchedModel]:
    """Makes the batch of B rows (each up to ``positions`` tokens) that ``family``'s backend decodes
    in: `BatchedLM` on torch, `LlamaCppBatched` on llama.cpp (a context per B, reused: `start`
    clears it). DecodeError where the backend has no batched path."""
    llama = _llamacpp_model(family)
    if llama is not None:
        from decoders.backends.llamacpp_batched import LlamaCppBatched

        contexts: dict[int, LlamaCppBatched] = {}

        def on_llamacpp(rows: int) -> BatchedModel:
            if rows not in contexts:
                contexts[rows] = LlamaCppBatched(llama, rows, positions)
            return contexts[rows]

        return on_llamacpp
    from decoders.backends.batched import BatchedLM, batch_unsupported

    model = family.main_model
    if model is None:
        raise DecodeError(f"{family.label} keeps no transformers model to decode in batches; use the torch backend "
                          "or the llama.cpp one")
    reason = batch_unsupported(model)
    if reason is not None:
        raise DecodeError(f"{family.label} cannot decode in batches: {reason}")
    return lambda rows: BatchedLM(model, family.context_length)


class BatchRow(Record, kw_only=True):
    """One method at one batch size over the rounds."""

    method: str
    batch: int
    throughput: float  # tokens per second over all sequences (mean over rounds)
    latency_s: float  # mean seconds until a sequence was done
    ar_throughput: float  # autoregressive decoding at the same batch size, same rounds
    speedup: float  # mean over rounds of throughput / ar_throughput
    spread: float | None  # two standard errors of that ratio over the rounds (None: one round)
    forwards: int  # verify forwards of the last round
    accepted_per_forward: float  # tokens per forward per sequence (tau at batch B)
    identical: bool  # every sequence equal to its batch-1 autoregressive output
    policy: str = "fixed"  # the draft length: "fixed" (up to k) or "adaptive" (the cost model's K)
    k: int = 0  # the longest draft (adaptive: its cap)
    draft_lengths: list[int] = msgspec.field(default_factory=list)  # K sent per iteration, last round
    backend: str | UnsetType = UNSET  # the backend it ran on, in a run on several ("torch", "llamacpp")


class BatchSide(Record, kw_only=True):
    """One backend of a batch bench on several (``--backends``): its model, its surface and its rows."""

    backend: str  # "torch", "llamacpp"
    label: str  # as row labels show it: "llama.cpp"
    family: FamilyInfo
    surface: dict[str, list[float]]  # T(B, k) on this backend by B (as text), k = 1..16
    surface_unit_ms: float  # its T(1, 1) in ms
    methods: list[str]  # its rows' labels ("ar [torch]" first)
    left_out: list[str] = msgspec.field(default_factory=list)  # a row it cannot batch, and why, one line each


class BatchReport(Record, kw_only=True):
    """A batch bench as report.json holds it (kind "batch")."""

    schema: int = REPORT_SCHEMA
    kind: Literal["batch"] = "batch"
    created: str = ""
    family: FamilyInfo
    machine: BatchMachine  # cpu, vector features, threads, load average before and after
    settings: BatchSettings  # batch sizes, methods, tokens, rounds, prompts
    surface: dict[str, list[float]]  # T(B, k) by B (as text), k = 1..16 (on several backends: the first's)
    surface_unit_ms: float
    rows: list[BatchRow] = msgspec.field(default_factory=list)
    crossover: dict[str, str] = msgspec.field(default_factory=dict)  # per method: where it stops paying
    divergences: list[Divergence] = msgspec.field(default_factory=list)
    #: the synthetic draft's cells (`decoders.bench.batch_synthetic`), apart from the real rows
    synthetic: list[SyntheticBatchRow] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    elapsed_s: float = 0.0
    # a run on several backends (`--backends`, `decoders.bench.batch_multi`): each one's surface and
    # rows by backend ("torch", "llamacpp"); left out in a run on one (`surface` is its surface)
    backends: dict[str, BatchSide] | UnsetType = UNSET
    # in a run on several: the first two backends' batch-1 autoregressive outputs, prompt by prompt
    agreement: list[Agreement] | UnsetType = UNSET

    @property
    def sides(self) -> dict[str, BatchSide]:
        """Each backend's side in a run on several; empty in a run on one."""
        return {} if isinstance(self.backends, UnsetType) else self.backends

    @property
    def agreements(self) -> list[Agreement]:
        return [] if isinstance(self.agreement, UnsetType) else self.agreement


def crossover(rows: Sequence[BatchRow]) -> str:
    """Where a method's rows (ascending batch) stop paying: the first batch size with a speedup below 1."""
    paying = [r for r in rows if r.speedup >= 1.0]
    below = [r for r in rows if r.speedup < 1.0]
    if not rows:
        return "not measured"
    if not below:
        return f"pays at every batch size measured (up to {rows[-1].batch})"
    if not paying:
        return f"pays at no batch size measured (from {rows[0].batch})"
    return f"stops paying at batch {below[0].batch}"


def run_batch_bench(family, prompts: Sequence[list[int]], batches: Sequence[int], methods: Sequence[str],
                    max_new: int, rounds: int = 2, k: int = 10, surface_repeats: int = 5, surface_widths: int = WIDTHS,
                    progress: Callable[[str], None] | None = None, clock: Callable[[], float] = time.perf_counter,
                    machine: BatchMachine | None = None, policy: str = "fixed",
                    variants: Sequence[Any] | None = None, on_step: Callable[[str, int, list], None] | None = None,
                    on_row: Callable[[BatchRow], None] | None = None,
                    synthetic: SyntheticGrid | None = None, suffix: SuffixShape | None = None,
                    lengths: dict[str, int] | None = None,
                    on_cell: Callable[[SyntheticBatchRow], None] | None = None) -> BatchReport:
    """Every method in ``methods`` (or every variant of ``variants``) at every batch size beside
    autoregressive decoding, ``rounds`` rounds each (round r takes the prompts from offset r * B,
    so rounds differ in prompts too), the surface T(B, k) first, each sequence checked against its
    batch-1 output: one lane (`decoders.bench.batch_lane.BatchLane`). ``policy`` "adaptive": each
    iteration's draft length from the cost model over the measured surface
    (`decoders.methods.batch.adaptive`), else up to ``k`` tokens. ``on_step``: (row label, batch
    size, every sequence's record) after each iteration, off the clock; ``on_row``: each row once
    measured (a screen's table, as it fills). ``synthetic``: its cells at every batch size too, in
    their own rows (`decoders.bench.batch_synthetic`; ``on_cell``: each once measured). ``suffix``: the
    suffix rows' depth, factor,
    minimum probability and memory (None: the batch-1 defaults, no memory;
    `decoders.methods.batch.suffix`); ``lengths``: a method's own k in place of ``k`` (`row_specs`;
    suffix decoding's ``--suffix-max``)."""
    from decoders.bench.batch_lane import BatchLane

    specs = row_specs(methods, k, policy, variants, lengths)
    started = clock()
    lane = BatchLane(family, prompts, specs, max_new, rounds, k, synthetic=synthetic, suffix=suffix, clock=clock,
                     progress=progress, on_step=on_step, on_row=on_row, on_cell=on_cell)
    lane.measure_surface(batches, surface_widths, surface_repeats)
    for size in batches:
        lane.measure(size)
    return BatchReport(
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), family=family.describe(), machine=machine or BatchMachine(),
        settings=BatchSettings(batches=list(batches), methods=lane.labels, max_new_tokens=max_new,
                               rounds=rounds, k=k, prompts=len(prompts), draft_policy=policy,
                               synthetic=synthetic or UNSET),
        surface={str(b): row for b, row in lane.surface.items()}, surface_unit_ms=lane.unit_ms, rows=lane.rows,
        crossover=lane.crossover(), divergences=lane.divergences, synthetic=lane.synthetic_rows,
        elapsed_s=round(clock() - started, 1))
