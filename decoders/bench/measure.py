"""One prompt measured side by side: every method of ours, each beside transformers' counterpart.

Every prompt gets a fresh `Engine`, so the autoregressive baseline is decoded again, never a
cached timing; our runs alternate with transformers' (ours, theirs, ours, ...) so that load from
other processes on the machine hits both sides alike. What the runs contribute to the report
(`OursEntry`, `TheirsEntry`, `Sample`) is declared in `decoders.bench.entries`.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Callable, Sequence

from msgspec import UNSET

from decoders.bench.common import BASELINE
from decoders.bench.entries import OursEntry, Sample, TheirsEntry
from decoders.bench.entries import Theorem as Theorem  # read here by older imports
from decoders.bench.prompts import BenchPrompt
from decoders.bench.reference import HFRun, Reference
from decoders.bench.settings import Pairing
from decoders.core.params import DecodeParams
from decoders.records.run import RunResult

if TYPE_CHECKING:
    from decoders.bench.drafts import Row
    from decoders.bench.session import SessionMemories
    from decoders.engine import Engine
    from decoders.models.family import Family


AGAIN = "ar[again]"  # autoregressive decoding timed once more against its own baseline (pairing noise)
_GREEDY = "\x00greedy"  # transformers' greedy run among its runs by generate() call (`PromptMeasurer.measure`)


def bench_engine(family: Family) -> Engine:
    """The engine a bench run measures with: every row paired "interleaved" with its own baseline
    (`decoders.engine`), as the app runs, where the backend can make a twin of its model; else the
    engine pairs "sequential" (`pairing_of`, `Engine.no_twin` says why). One per run (or backend),
    kept from prompt to prompt: its twin and helpers keep the caches a first prompt grew."""
    from decoders.engine import Engine

    engine = Engine(family, pairing="interleaved")
    engine.twin_runner()  # built (and warmed up) now, not inside the first timed run
    return engine


def pairing_of(engine: Engine) -> Pairing:
    """How ``engine``'s runs are paired: "interleaved" where it has a twin, else "sequential"."""
    return "interleaved" if engine.pairing == "interleaved" and engine.no_twin is None else "sequential"


def pairing_note(engine: Engine) -> str | None:
    """The report's note for an engine that could not pair its rows interleaved, or None."""
    if pairing_of(engine) == "interleaved":
        return None
    why = engine.no_twin or "sequential pairing was asked for"
    return (f"rows paired sequentially ({why}): each prompt's autoregressive baseline is decoded once, before "
            "its rows, and every row is measured against it")


class PromptMeasurer:
    """Runs every row (a method or a variant of one) on one prompt, ours and transformers' alternately.

    Interleaved pairing (`bench_engine`), as the app runs: every row of ours is decoded beside its
    own autoregressive baseline, step by step on a second cache, and its speedup is over that
    baseline, timed in the same seconds. Sequential pairing (a backend without a twin): the
    prompt's baseline is decoded once, before the first row, and every row is over it.

    First the prompt is warmed up (`Engine.warm`: a short untimed decode of each draft the rows
    use, and of transformers' greedy): the first decode of a prompt pays for shapes and caches
    that its later decodes do not, and would slow whichever side ran first. Then per row: ours,
    transformers' counterpart (its greedy generate() after our first row), and where measured the
    record=True twin, which goes before or after the record=False run on alternate prompts so that
    drift cancels. Rows whose counterpart is the same ``generate()`` call (a tree beside its linear
    draft) share one transformers run. Every row of ours is compared with AR's output on its own.
    Last, autoregressive decoding runs once more (`AGAIN`) against its own baseline: the same
    decode on both sides of the pairing, how far any row's speedup can move by timing noise alone.
    """

    def __init__(self, family: Family, rows: Sequence[Row], base: DecodeParams, record_labels: Sequence[str],
                 tick: Callable[[str], None], reference: Reference, engine: Engine | None = None,
                 warm: bool = True, memories: SessionMemories | None = None):
        self.family, self.rows, self.base = family, rows, base
        self.record_labels, self.tick, self.reference = record_labels, tick, reference
        self.engine = engine if engine is not None else bench_engine(family)
        self.warm = warm
        # a session (`decoders.bench.session`): each row that drafts from a memory runs with its own
        self.memories = memories

    @property
    def pairing(self) -> str:
        return pairing_of(self.engine)

    def _first_run(self, engine, prompt: BenchPrompt, ids: list[int], params: DecodeParams,
                   label: str) -> tuple[RunResult, HFRun | None]:
        """Sequential: the engine's baseline, then transformers' greedy generate(), then the method run."""
        from decoders.core.events import PhaseStarted

        theirs_ar = None
        self.tick("ours ar")
        for event in engine.stream(prompt.text, params, history=prompt.history):
            if isinstance(event, PhaseStarted) and event.phase == "method":
                self.tick(f"{self.reference.name} ar")
                theirs_ar = self.reference.greedy(ids, params.max_new_tokens)
                self.tick(label)
            elif isinstance(event, RunResult):
                return event, theirs_ar
        raise RuntimeError("the engine finished without a result")

    def warm_up(self, prompt: BenchPrompt, ids: list[int], rows: Sequence[Row]) -> None:
        """The prompt's shapes warmed, untimed: one short decode per draft the rows use (the main
        model and its twin on the first), then transformers' greedy."""
        from decoders.core.declarations import get_method
        from decoders.engine import WARM_TOKENS

        self.tick("warm-up")
        seen: set[int] = set()
        for row in rows:
            helper = row.family.helper if get_method(row.method).needs_helper else None
            if id(helper) in seen:
                continue
            seen.add(id(helper))
            self.engine.draft_with(row.family)
            with self.memories.of(row) if self.memories is not None else nullcontext():  # drafts as its run will
                self.engine.warm(prompt.text, row.params, history=prompt.history)
        self.reference.greedy(ids, min(WARM_TOKENS, self.base.max_new_tokens))

    def measure(self, prompt: BenchPrompt, ids: list[int], repeat: int, flip: bool,
                record_twins: bool = True) -> Sample:
        from decoders.bench.drafts import Row
        from decoders.bench.variants import Variant

        engine = self.engine
        engine.forget_baselines()  # sequential: the baseline is decoded on each prompt, never a cached timing
        paired = self.pairing == "interleaved"
        sample = Sample(prompt.question_id, prompt.category, prompt.group, repeat, len(ids), pairing=self.pairing,
                        baselines={} if paired else UNSET)
        memories = self.memories
        if memories is not None:
            sample.turn, sample.memory = prompt.turn, memories.sizes(self.rows)
        theirs: dict[str, HFRun | None] = {}  # transformers runs by their generate() call; `_GREEDY`: its greedy
        baseline_row = Row(Variant(BASELINE), self.base.replace(method=BASELINE), self.family, self.reference)
        rows = list(self.rows) or [baseline_row]
        if self.warm:
            self.warm_up(prompt, ids, rows)
        for row in rows:
            with memories.of(row) if memories is not None else nullcontext():
                self._measure_row(row, prompt, ids, sample, flip, record_twins, theirs)
        self.tick("ours ar again" + (" beside ours ar" if paired else ""))
        again = engine.run(prompt.text, self.base.replace(method=BASELINE), history=prompt.history)
        sample.ours[AGAIN] = OursEntry.of_run(again)
        if paired:
            sample.own_baselines[AGAIN] = OursEntry.of_baseline(again)
        theirs_ar_run = theirs.get(_GREEDY)
        if theirs_ar_run is not None:
            sample.theirs[BASELINE] = TheirsEntry.of(theirs_ar_run, None)
        sample.compare()
        return sample

    def _measure_row(self, row: Row, prompt: BenchPrompt, ids: list[int], sample: Sample, flip: bool,
                     record_twins: bool, shared: dict[str, HFRun | None]) -> None:
        """``row``'s runs on this prompt (with recording on too, where measured) and its counterpart's;
        ``shared``: transformers' runs so far by their generate() call, its greedy under `_GREEDY`."""
        engine, paired = self.engine, self.pairing == "interleaved"
        engine.draft_with(row.family)
        label, params = row.label, row.params
        twin = record_twins and label in self.record_labels
        first_on = twin and flip  # which of the record pair runs first alternates by prompt
        say = f"ours {label}" + (" (recording on)" if first_on else "")
        if shared.get(_GREEDY) is None and not paired:
            result, shared[_GREEDY] = self._first_run(engine, prompt, ids, params.replace(record=first_on), say)
        else:
            self.tick(say + (" beside ours ar" if paired else ""))
            result = engine.run(prompt.text, params.replace(record=first_on), history=prompt.history)
        if BASELINE not in sample.ours:  # the first row's baseline is the prompt's AR row
            sample.ours[BASELINE] = OursEntry.of_baseline(result)
            sample.text = result.baseline.text
        theirs_ar_run = shared.get(_GREEDY)
        if theirs_ar_run is None:
            self.tick(f"{self.reference.name} ar")
            theirs_ar_run = shared[_GREEDY] = self.reference.greedy(ids, params.max_new_tokens)
        if row.method == BASELINE:  # an AR-only run keeps the baseline as its AR figures
            return
        (sample.record_on if first_on else sample.ours)[label] = OursEntry.of_run(result)
        if paired and not first_on:
            sample.own_baselines[label] = OursEntry.of_baseline(result)
        call = row.counterpart
        if call is not None:
            if call not in shared:
                self.tick(f"{row.reference.name} {label}")
                shared[call] = row.reference.run(row.method, ids, params)
            counterpart = shared[call]
            if counterpart is not None and theirs_ar_run is not None:
                sample.theirs[label] = TheirsEntry.of(counterpart, theirs_ar_run.ids)
        if twin:
            self.tick(f"ours {label}" + ("" if first_on else " (recording on)"))
            second = engine.run(prompt.text, params.replace(record=not first_on), history=prompt.history)
            (sample.ours if first_on else sample.record_on)[label] = OursEntry.of_run(second)
            if paired and first_on:
                sample.own_baselines[label] = OursEntry.of_baseline(second)
