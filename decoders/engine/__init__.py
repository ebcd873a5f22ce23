"""The engine: a loaded model family, its runners, and the baselines already measured on it.

`Engine.stream` is what the app's worker and the command line consume: it validates the input,
then runs the method beside its autoregressive baseline, yielding progress and iteration records
as they happen, and finally a `RunResult`.

How the baseline is paired with the method (`PAIRINGS`):

* ``interleaved`` (the default): the baseline decodes the same prompt on a second cache of the
  same model (`decoders.backends.hf.twin_of`), one step at a time between the method's
  iterations, keeping level with the method's token count. Each run's clock stops while the other
  runs, so both are timed in the same seconds of the machine's life: a machine that turns busy
  or quiet mid-run slows or speeds both alike and the ratio holds. The price: every run decodes
  its baseline again (about one autoregressive run's time on top of the method's).
* ``sequential``: the baseline decoded once per prompt and settings and reused, the machine's
  change since then read from a probe after the run (`decoders.analysis.timing.paired_drift`).
  Cheaper when one prompt is run many times; wrong by the machine's change within the run. Also
  what a backend that cannot make a twin gets.

Either way, the first decode of a prompt pays for shapes and caches that its later decodes do
not; `Engine.warm` pays for them untimed, before the first timed run of a prompt (the bench, the
sweep and ``tui-decode run`` call it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, Sequence, Union

import msgspec

from decoders.analysis.summary import summarize
from decoders.backends.capabilities import ChunkedCache, HasChunkedCache, Tapped
from decoders.backends.hf import twin_of
from decoders.backends.runner import KVRunner
from decoders.core.declarations import Method, all_methods
from decoders.core.errors import DecodeError
from decoders.core.events import PhaseStarted, Progress
from decoders.core.params import DecodeParams
from decoders.engine.calibration import Calibrating
from decoders.engine.cost import CostCurves
from decoders.engine.drafting import DraftSwitching, own_helper_model, torch_backend
from decoders.methods.autoregressive import METHOD as AUTOREGRESSIVE
from decoders.methods.shared.common import DecodeContext
from decoders.models.drafts import DraftCache, row_choice
from decoders.records.run import Iteration, Run, RunResult

if TYPE_CHECKING:
    from decoders.models.family import Family

Event = Union[PhaseStarted, Progress, Iteration, RunResult]
#: Called where neither run's clock runs, with the run that steps next ("method", "baseline"), or
#: "end" once the pairing's last timed step is done.
Idle = Callable[[str], None]

PAIRINGS = ("interleaved", "sequential")

#: Tokens `Engine.warm` decodes: the prefill and a few one-token (or verify) steps of each runner.
WARM_TOKENS = 4
#: Cache positions `Engine.warm` makes room for beyond the prompt and its budget (a draft's lookahead).
WARM_ROOM = 64


class Engine(DraftSwitching, Calibrating, CostCurves):
    """Runs methods on one loaded family; models stay loaded and baselines are measured once. Its draft
    switching is `decoders.engine.drafting`, its run-to-run calibration `decoders.engine.calibration`."""

    def __init__(self, family: Family, clock: Callable[[], float] | None = None, pairing: str = "interleaved"):
        if pairing not in PAIRINGS:
            raise ValueError(f"pairing must be one of {', '.join(PAIRINGS)}, got {pairing!r}")
        self.family = family
        self.clock = clock
        self.pairing = pairing
        self._twin: KVRunner | None = None  # the interleaved baseline's runner, built on first use
        self._no_twin: str | None = None  # why the main backend cannot make one (then: sequential)
        self.main = KVRunner(family.main, clock)
        self.helper = KVRunner(family.helper, clock) if family.helper is not None else None
        self._baselines: dict[tuple, Run] = {}  # by prompt and settings: the sequential pairing's only
        self._cost_curves: dict[int, list[float]] = {}  # T(k) by context bucket, measured once each
        # the drafts built from the main model (`decoders.models.drafts`), each built once, by the
        # draft as the draft row names it; the family's own helper model to go back to
        self._drafts = DraftCache()
        loaded = row_choice(family.draft)
        if loaded is not None and family.helper is not None:
            self._drafts.keep(loaded, family.helper)
        self._own_helper = family if own_helper_model(family) else None
        # the machine's run-to-run noise that widens every spread (`decoders.analysis.calibration`):
        # read on the first run (`find_calibration`); ``calibration_note`` says why there is none,
        # ``calibration_problem`` why the file could not be read (damaged)
        self.calibration = None
        self.calibration_note = self.calibration_problem = None
        self._calibration_read = False
        self.warmed: set[tuple] = set()  # what a consumer has warmed (`warm`) and need not warm again
        # why the suffix memory's file could not be written after the last run (a read-only folder,
        # a full disk): the run stands, its caller says so (`tui-decode run`, the app); None: written
        self.memory_error: str | None = None

    @property
    def baselines_measured(self) -> int:
        """Baselines kept for reuse (sequential pairing only: an interleaved run keeps none)."""
        return len(self._baselines)

    def forget_baselines(self) -> None:
        """Decode each kept baseline again on its next sequential run (e.g. in a quiet moment)."""
        self._baselines.clear()

    def prompt_ids(self, prompt: str, params: DecodeParams, history: Sequence[str] = ()) -> list[int]:
        """Token ids of the prompt (after ``history``, the conversation before it: `Family.encode_prompt`),
        checked against the model's context."""
        if not prompt.strip():
            raise DecodeError("the prompt is empty; type a prompt (or give --prompt TEXT / --prompt-file PATH)")
        ids = self.family.encode_prompt(prompt, params.chat_template, history)
        context = self.family.context_length
        if len(ids) >= context:
            raise DecodeError(f"the prompt is {len(ids)} tokens, the model's context is {context}; shorten the prompt")
        if len(ids) + params.max_new_tokens > context:
            raise DecodeError(f"the prompt ({len(ids)} tokens) plus max_new_tokens ({params.max_new_tokens}) exceeds "
                              f"the model's context of {context}; set max_new_tokens to {context - len(ids)} or less")
        return ids

    def check(self, prompt: str, params: DecodeParams, history: Sequence[str] = ()) -> tuple[DecodeParams, list[int]]:
        """Validate everything up front, so that bad input fails before any model time is spent."""
        params = params.validated()
        method = params.method_def
        if method.needs_helper and self.helper is None:
            drafts = "--helper SRC, --self-draft int4 or --self-draft-layer L" if torch_backend(self.family) \
                else "--helper FILE.gguf (llama.cpp drafts only with a GGUF helper)"
            raise DecodeError(f"{self.family.label} has no helper model, so {method.label.lower()} decoding is "
                              f"unavailable; give {drafts}, or pick a method that "
                              f"needs none ({', '.join(m.name for m in all_methods() if not m.needs_helper)})")
        return params, self.prompt_ids(prompt, params, history)

    def stream(self, prompt: str, params: DecodeParams, cancelled: Callable[[], bool] = lambda: False,
               idle: Idle | None = None, *, history: Sequence[str] = ()) -> Iterator[Event]:
        """Progress, iterations and finally the `RunResult` (partial, ``finish: cancelled``, when
        ``cancelled()`` turned true during the method run; nothing when during the baseline).

        ``idle(next_run)``, when given, is called in the interleaved pairing wherever neither
        run's clock runs, naming the run that steps next ("method" or "baseline", and "end" after
        the pairing's last timed step): a consumer's
        slow work (a UI drawing what it was handed) belongs there, and spread evenly over both
        kinds of point, so that the first step after it (which runs cold) falls as often on
        either run (`tui_decode.workers.decode`). ``history``: the conversation before ``prompt``
        (user and assistant messages taking turns: a later turn of a multi-turn question)."""
        params, ids = self.check(prompt, params, history)
        main = self.family.main
        if isinstance(main, Tapped) and main.tap is not None:
            main.tap = None  # a trained head's draft hands the target its tap again when it follows
        twin = self.twin_runner() if self.pairing == "interleaved" else None
        if twin is not None:
            yield from self._stream_interleaved(prompt, ids, params, cancelled, twin, idle)
            return
        key = (tuple(ids), params.baseline_key())
        baseline = self._baselines.get(key)
        yield PhaseStarted("baseline", "Autoregressive baseline", params.max_new_tokens, cached=baseline is not None,
                           prompt_tokens=len(ids))
        if baseline is None:
            base_params = params.replace(method=AUTOREGRESSIVE.name, record=False)
            baseline = yield from self._drive(AUTOREGRESSIVE, ids, base_params, cancelled, "baseline")
            if baseline.finish == "cancelled":
                return
            self._baselines[key] = baseline
        method = params.method_def
        yield PhaseStarted("method", params.method, params.max_new_tokens, prompt_tokens=len(ids))
        run = yield from self._drive(method, ids, params, cancelled, "method")
        probe = self._probe(ids + run.ids)
        curve = yield from self._run_curve(params, ids + run.ids, cancelled)
        summary = summarize(run, baseline, params, prompt_tokens=len(ids), probe_ms=probe, cost_curve=curve,
                            pairing="sequential", calibration=self.find_calibration())
        yield self._result(prompt, ids, params, run, baseline, summary)

    def _result(self, prompt: str, ids: list[int], params: DecodeParams, run: Run, baseline: Run,
                summary) -> RunResult:
        import torch  # the CPU threads the run was timed with (its timings depend on them)

        if summary.first_divergence is not None:
            summary.divergence = self._divergence(ids, baseline.ids, run.ids, summary.first_divergence)
            summary.explanation += " " + summary.divergence_text()
        self.memory_error = None
        if run.finish != "cancelled" and run.ids:  # off both clocks: the session's memory (suffix decoding)
            from decoders.methods.shared.suffix_memory import remember

            self.memory_error = remember(self.family, ids, run.ids).save_error
        described = msgspec.structs.replace(self.family.describe(), threads=torch.get_num_threads())
        return RunResult(method=run, baseline=baseline, summary=summary, params=params.to_json(), prompt=prompt,
                         prompt_ids=ids, family=described)

    # -- the interleaved pairing -----------------------------------------------------------------
    def twin_runner(self) -> KVRunner | None:
        """The runner the interleaved baseline decodes on: the main model again with a cache of
        its own, built (and warmed up) once. None where the backend cannot make one; `no_twin`
        then says why and runs are paired sequentially."""
        if self._twin is None and self._no_twin is None:
            backend = twin_of(self.family.main)
            if backend is None:
                self._no_twin = f"{type(self.family.main).__name__} cannot run a second cache of its model"
                return None
            from decoders.models.backend_choice import warm_up

            warm_up(backend)
            self._twin = KVRunner(backend, self.clock)
        return self._twin

    @property
    def no_twin(self) -> str | None:
        return self._no_twin

    # -- warming a prompt up -----------------------------------------------------------------------
    def warm(self, prompt: str, params: DecodeParams, tokens: int = WARM_TOKENS, *,
             history: Sequence[str] = ()) -> None:
        """An untimed short decode of ``prompt`` as a run of ``params`` makes it, thrown away:
        the prefill and a few steps on every runner the run uses (the main one; the twin, when
        interleaved, or the main one's baseline, when sequential; the helper, when the method
        drafts), each runner's cache made room for the whole budget, and the verify-cost curve
        at the prompt's context measured.

        The first decode of a prompt pays what no later one pays: the allocator's first blocks
        of its prefill's shapes, a cache grown to its length, a cost curve a later run finds
        measured (an adaptive draft policy drafts by it). Paired, the baseline prefills first and
        pays them alone. On the bundled model (one thread) the first decode of the longest prompt
        so far took 1.46x its second's ms/token (its prefill 1.54x), where prompts no longer than
        one already decoded showed no such gap (on a loaded machine, where one figure moved by
        20% either way). Call it before the first timed run of each
        prompt (the bench, the sweep and `tui-decode run` do); a warm prompt gains nothing."""
        params, ids = self.check(prompt, params, history)
        short = params.replace(max_new_tokens=max(1, min(tokens, params.max_new_tokens)), record=False)
        main = self.family.main
        if isinstance(main, Tapped) and main.tap is not None:
            main.tap = None  # as `stream` does
        method, never = short.method_def, lambda: False
        twin = self.twin_runner() if self.pairing == "interleaved" else None
        if twin is not None:
            run, _ = _exhaust(self._drive_paired(method, ids, short, never, twin))
        else:
            _exhaust(self._drive(AUTOREGRESSIVE, ids, short.replace(method=AUTOREGRESSIVE.name), never,
                                     "baseline"))
            run = _exhaust(self._drive(method, ids, short, never, "method"))
        room = min(len(ids) + params.max_new_tokens + WARM_ROOM, self.family.context_length)
        for runner in (self.main, twin, self.helper if method.needs_helper else None):
            if runner is not None:
                _make_room(runner, room)
        _exhaust(self._run_curve(params, ids + run.ids))

    def _stream_interleaved(self, prompt: str, ids: list[int], params: DecodeParams, cancelled, twin: KVRunner,
                            idle: Idle | None = None):
        yield PhaseStarted("method", params.method, params.max_new_tokens, prompt_tokens=len(ids), paired=True)
        run, baseline = yield from self._drive_paired(params.method_def, ids, params, cancelled, twin, idle)
        curve = yield from self._run_curve(params, ids + run.ids, cancelled)
        summary = summarize(run, baseline, params, prompt_tokens=len(ids), cost_curve=curve, pairing="interleaved",
                            calibration=self.find_calibration())
        yield self._result(prompt, ids, params, run, baseline, summary)

    def _drive_paired(self, method: Method, ids: list[int], params: DecodeParams, cancelled, twin: KVRunner,
                      idle: Idle | None = None):
        """The method and its baseline in alternation, each from an empty cache: the baseline's
        prefill and first token, the method's; then after each method iteration, baseline steps
        until it has as many tokens. When the method is done the baseline stops at its count (its
        budget is what the method emitted). Returns (method run, baseline run)."""
        self.main.reset()
        if self.helper is not None:
            self.helper.reset()
        twin.reset()
        clock = self.main.clock
        level = [False]  # the baseline has reached the finished method's count
        base_params = params.replace(method=AUTOREGRESSIVE.name, record=False)
        base_gen = AUTOREGRESSIVE.run(DecodeContext(self.family, ids, base_params, twin, None, clock,
                                                    lambda: level[0] or cancelled()))
        gen = method.run(DecodeContext(self.family, ids, params, self.main,
                                       self.helper if method.needs_helper else None, clock, cancelled,
                                       cost_curve=self.known_cost_curve(len(ids))))
        base = _Follower(base_gen)
        base.step()
        run = None
        tokens = 0
        while run is None:
            if idle is not None and tokens:
                idle("method")
            try:
                it = next(gen)
            except StopIteration as stop:
                run = stop.value
                break
            yield it
            tokens += len(it.emit)
            if idle is not None and base.run is None and base.tokens < tokens:
                idle("baseline")
            while base.run is None and base.tokens < tokens and not cancelled():
                base.step()
        while base.run is None and base.tokens < len(run.ids) and not cancelled():
            base.step()
        if base.run is None:
            level[0] = True
            base.step()
        if idle is not None:
            idle("end")
        baseline = base.run
        assert baseline is not None  # the generator returns once its cancel test turns true
        if baseline.finish == "cancelled" and not cancelled():
            baseline.finish = "length"  # stopped at its budget: what the method emitted
        return run, baseline

    def run(self, prompt: str, params: DecodeParams, *, history: Sequence[str] = ()) -> RunResult:
        """The whole run at once (command line, tests, benchmarks)."""
        for event in self.stream(prompt, params, history=history):
            if isinstance(event, RunResult):
                return event
        raise RuntimeError("the engine finished without a result")

    def _divergence(self, ids: list[int], base: list[int], out: list[int], at: int) -> dict:
        """What the target's logits say where a greedy run left its baseline: the top-2 margin of a
        one-token step after the common prefix. A margin near float32 noise (1e-4) is a near-tie
        that a wider forward may break the other way; a large one points at a bug."""
        import torch

        seq = ids + base[:at]
        if len(seq) >= self.family.context_length:
            return {}
        logits = self.main.run(seq)[0]
        top = torch.topk(logits, 2)
        values, tokens = top.values.tolist(), top.indices.tolist()
        disp = self.family.display
        return {"at": at, "margin": round(values[0] - values[1], 6), "top2": [disp(t) for t in tokens],
                "baseline": disp(base[at]) if at < len(base) else None,
                "method": disp(out[at]) if at < len(out) else None}

    def _drive(self, method: Method, ids: list[int], params: DecodeParams, cancelled, phase: str):
        """Run one method from an empty cache (every run pays its own prefill: fair timings)."""
        self.main.reset()
        if self.helper is not None:
            self.helper.reset()
        clock = self.main.clock
        ctx = DecodeContext(self.family, ids, params, self.main, self.helper if method.needs_helper else None,
                            clock, cancelled, cost_curve=self.known_cost_curve(len(ids)))
        gen = method.run(ctx)
        try:
            while True:
                it = next(gen)
                yield it if phase == "method" else Progress(phase, it.pos + len(it.emit), params.max_new_tokens)
        except StopIteration as stop:
            return stop.value


def _exhaust(gen):
    """Drive a generator to its end, dropping what it yields; its return value."""
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def _make_room(runner: KVRunner, positions: int) -> None:
    """Grow the runner's cache to hold ``positions`` now, untimed, where the backend keeps a static
    cache that grows in chunks (`decoders.backends.kv_cache.KVCache.reserve`); else nothing (a
    cache that grows by the token pays alike on both sides of a pair)."""
    backend = runner.backend
    if isinstance(backend, HasChunkedCache) and isinstance(backend.cache, ChunkedCache) \
            and isinstance(backend.cache.max_positions, int):
        backend.cache.reserve(min(positions, backend.cache.max_positions))


class _Follower:
    """A method generator driven step by step from outside: its tokens so far and, once it
    returned, its run."""

    def __init__(self, gen) -> None:
        self.gen = gen
        self.tokens = 0
        self.run: Run | None = None

    def step(self) -> None:
        try:
            it = next(self.gen)
            self.tokens += len(it.emit)
        except StopIteration as stop:
            self.run = stop.value

