"""Chain drafting at batch B: every row drafts its own chain (autoregressive: none; prompt
lookup: a copy of an earlier occurrence of its tail n-gram; suffix decoding: the most frequent
continuation of its tail in a suffix tree over its own prompt and output, or in the memory of
earlier responses, `decoders.methods.batch.suffix`; speculative decoding: a draft model's
greedy chain, every row's drafted together in γ batched steps, `model_draft.ModelDraft`, or a
trained head's from the target's hidden states, `head_draft.HeadDraft`), one
forward verifies every row's chain, and each row keeps its own longest accepted prefix plus the
target's next token (`accept_prefix`'s rule, on the host values of the one transfer).

Greedy only: a row's output is its batch-1 output up to the batched kernels' rounding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from decoders.core.errors import DecodeError
from decoders.methods.batch.suffix import SuffixDraft, SuffixShape
from decoders.methods.shared.ngram import NgramIndex

if TYPE_CHECKING:
    from decoders.backends.capabilities import BatchedModel
    from decoders.methods.batch.adaptive import BatchDraftPolicy

#: The largest batch a user can ask for.
MAX_BATCH = 64
#: Methods that decode at batch B (each row drafts a chain of its own).
BATCH_METHODS = ("ar", "pld", "suffix", "spec")


class Drafter(Protocol):
    def propose(self, seq: list[int], budget: int) -> list[int]: ...

    def extend(self, seq: list[int]) -> None: ...


class NoDraft:
    """Autoregressive decoding: nothing drafted, one token per row per forward."""

    def propose(self, seq: list[int], budget: int) -> list[int]:
        return []

    def extend(self, seq: list[int]) -> None:
        pass


class LookupDraft:
    """Prompt lookup: up to ``k`` tokens copied after the latest earlier match of the tail n-gram."""

    def __init__(self, seq: list[int], k: int, n_min: int, n_max: int):
        self.k = k
        self.index = NgramIndex(n_min, n_max, list(seq))

    def propose(self, seq: list[int], budget: int) -> list[int]:
        found = self.index.lookup(min(self.k, budget))
        return list(found[0]) if found else []

    def extend(self, seq: list[int]) -> None:
        self.index.extend(seq[len(self.index.seq):])


def drafter_for(method: str, k: int = 10, n_min: int = 1, n_max: int = 3,
                suffix: SuffixShape | None = None) -> Callable[[list[int]], Drafter]:
    """A maker of one row's drafter for ``method`` (one of `BATCH_METHODS`; ``suffix``: suffix
    decoding's shape and memory, None: the batch-1 defaults and no memory)."""
    if method == "ar":
        return lambda seq: NoDraft()
    if method == "pld":
        return lambda seq: LookupDraft(seq, k, n_min, n_max)
    if method == "suffix":
        shape = suffix or SuffixShape()
        return lambda seq: SuffixDraft(seq, k, shape)
    if method == "spec":
        raise DecodeError("speculative decoding at batch B drafts every row together: give decode_batch its draft")
    raise DecodeError(f"method {method!r} does not decode at batch > 1 yet; choose from {', '.join(BATCH_METHODS)}")


class BatchDraft(Protocol):
    """What drafts every row's chain together (`model_draft.ModelDraft`; a trained head,
    `head_draft.HeadDraft`; the batch bench's synthetic draft,
    `decoders.bench.batch_synthetic.SyntheticBatchDraft`). ``start`` runs after the target's
    prefill and ``settle`` right after its verify forward, before any row leaves it (a head reads
    that forward's hidden states)."""

    def start(self, prompts: Sequence[Sequence[int]]) -> None: ...

    def propose(self, seqs: Sequence[list[int]], budgets: Sequence[int]) -> list[list[int]]: ...

    def settle(self, accepted: Sequence[int]) -> None: ...

    def keep_rows(self, rows: Sequence[int]) -> None: ...

    def tidy(self, compact_at: float) -> None: ...


@dataclass
class SeqRecord:
    """One row's decode: its output, why it stopped, when (seconds since the batch started)."""

    prompt: list[int]
    out: list[int] = field(default_factory=list)
    finish: str = "length"
    done_s: float = 0.0
    drafted: int = 0
    accepted: int = 0
    iterations: int = 0

    @property
    def seq(self) -> list[int]:
        return self.prompt + self.out


@dataclass
class BatchRun:
    """A batch decoded together: each row's record, the wall time, the forwards it took."""

    method: str
    batch: int
    rows: list[SeqRecord]
    wall_s: float
    forwards: int
    max_slots: int = 0  # the widest the cache grew (columns, holes included)
    #: per iteration after the prefill: the draft length sent (the adaptive policy's K; with a
    #: fixed one the longest draft of any row)
    draft_lengths: list[int] = field(default_factory=list)
    #: seconds until every row's first token (the prompts' prefill; a model draft's too)
    prefill_s: float = 0.0

    @property
    def tokens(self) -> int:
        return sum(len(r.out) for r in self.rows)

    @property
    def throughput(self) -> float:
        """Tokens per second over all sequences."""
        return self.tokens / self.wall_s if self.wall_s else 0.0

    @property
    def latency_s(self) -> float:
        """Mean seconds until a sequence was done."""
        return sum(r.done_s for r in self.rows) / len(self.rows) if self.rows else 0.0


def _emit(row: SeqRecord, tokens: list[int], max_new: int, stop_ids: frozenset[int]) -> bool:
    """Append ``tokens`` to the row within its budget, up to a stop token; whether it is done."""
    for t in tokens:
        if len(row.out) >= max_new:
            break
        row.out.append(t)
        if t in stop_ids:
            row.finish = "eos"
            return True
    return len(row.out) >= max_new


def decode_batch(lm: BatchedModel, prompts: Sequence[Sequence[int]], max_new: int, method: str = "ar",
                 gamma: int = 10, stop_ids: frozenset[int] = frozenset(),
                 clock: Callable[[], float] = time.perf_counter, compact_at: float = 0.5, n_min: int = 1,
                 n_max: int = 3, make: Callable[[list[int]], Drafter] | None = None,
                 draft: BatchDraft | None = None, policy: BatchDraftPolicy | None = None,
                 on_step: Callable[[list[SeqRecord]], None] | None = None,
                 suffix: SuffixShape | None = None) -> BatchRun:
    """Decode ``prompts`` together, greedy, ``max_new`` tokens each at most: ``method`` "ar",
    "pld" (``gamma``: its copy length k), "suffix" (``gamma``: its k; ``suffix``: its depth,
    factor, minimum probability and memory) or "spec" (``draft`` drafts every row's chain, its γ
    set when it was made). A finished row leaves the batch at once; the cache's
    holes are squeezed out when they pass ``compact_at`` of its slots. ``make``: each row's
    drafter from its prompt and first token, in place of ``method``'s (a test's). ``policy``: the
    draft length K of each iteration, for every row together, from the cost model
    (`decoders.methods.batch.adaptive`; None: each row sends all it drafts; a model draft keeps
    the γ it was made with, and the policy's K is chosen before it drafts: see
    `decoders.methods.batch.adaptive`). ``on_step``: called with every row's record after the prefill and
    after each iteration (a screen's progress), its time off the clock."""
    if method == "spec" and draft is None and make is None:
        raise DecodeError("speculative decoding at batch B needs its draft model (decode_batch's draft)")
    make = make or (None if draft is not None else drafter_for(method, gamma, n_min, n_max, suffix))
    rows = [SeqRecord(list(p)) for p in prompts]
    off = [0.0]  # seconds spent in ``on_step``, taken off every time this returns

    def now() -> float:
        return clock() - off[0]

    def stepped() -> None:
        if on_step is not None:
            start = clock()
            on_step(rows)
            off[0] += clock() - start

    t0 = now()
    logits = lm.start(rows_prompts := [r.prompt for r in rows])
    forwards, widest = 1, lm.slots
    if draft is not None:
        draft.start(rows_prompts)
    first = logits.argmax(-1).tolist()
    prefill_s = now() - t0
    active: list[int] = []
    last: dict[int, int] = {}
    drafters: dict[int, Drafter] = {}
    for i, token in enumerate(first):
        rows[i].iterations = 1
        if _emit(rows[i], [token], max_new, stop_ids):
            rows[i].done_s = now() - t0
        else:
            active.append(i)
            last[i] = token
            if make is not None:
                drafters[i] = make(rows_prompts[i] + [token])
    lm.keep_rows(active)
    if draft is not None:
        draft.keep_rows(active)
    stepped()
    lengths: list[int] = []
    while active:
        draft_s = 0.0
        if draft is not None:  # every row's chain from the draft model's γ batched steps (K when a policy chose)
            budgets = [max_new - len(rows[i].out) - 1 for i in active]
            if policy is not None:  # chosen before drafting: a model draft's steps are what cost
                k = policy.choose(active, [max(0, b) for b in budgets])
                budgets = [min(k, b) for b in budgets]
            started = clock()
            drafts = draft.propose([rows[i].seq for i in active], budgets)
            draft_s = clock() - started
        else:
            drafts = []
            for i in active:
                row = rows[i]
                drafter = drafters[i]
                drafter.extend(row.seq)
                budget = max_new - len(row.out) - 1
                drafts.append(drafter.propose(row.seq, budget) if budget > 0 else [])
        if policy is not None and draft is None:
            k = policy.choose(active, [len(d) for d in drafts])
            drafts = [d[:k] for d in drafts]
        lengths.append(max(len(d) for d in drafts))
        new = [[last[i]] + d for i, d in zip(active, drafts, strict=True)]
        started = clock()
        best = lm.step(new).argmax(-1).tolist()  # the one host transfer of the iteration
        verify_s = clock() - started
        forwards += 1
        widest = max(widest, lm.slots)
        kept, still, taken = [], [], []
        for slot, i in enumerate(active):
            row, d, b = rows[i], drafts[slot], best[slot]
            n = 0
            while n < len(d) and d[n] == b[n]:
                n += 1
            row.drafted += len(d)
            row.accepted += n
            if policy is not None:
                policy.observe(i, len(d), n)
            row.iterations += 1
            kept.append(1 + n)  # the last token and the accepted drafts are cached now
            taken.append(n)
            if _emit(row, d[:n] + [b[n]], max_new, stop_ids):
                row.done_s = now() - t0
            else:
                last[i] = b[n]
                still.append(slot)
        lm.commit(kept)
        active = [active[s] for s in still]
        if draft is not None:  # settled while the verify forward's rows are all there (a head reads its states)
            started = clock()
            draft.settle(taken)
            draft_s += clock() - started
            draft.keep_rows(still)
            if policy is not None:
                policy.observe_times(len(new), max(len(x) for x in new), verify_s, lengths[-1], draft_s)
        lm.keep_rows(still)
        if draft is not None:
            draft.tidy(compact_at)
        if active and lm.holes > compact_at * lm.slots * lm.rows:
            lm.compact()
        stepped()
    return BatchRun(method, len(prompts), rows, now() - t0, forwards, widest, lengths, prefill_s)
