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

import dataclasses
from typing import TYPE_CHECKING, Callable, Iterator, Sequence, Union

from decoders.analysis.calibration import TOKENS as CALIBRATION_TOKENS
from decoders.analysis.calibration import Calibration
from decoders.analysis.summary import summarize
from decoders.analysis.timing import CURVE_WIDTHS, context_bucket, curve_phase, probe_steps
from decoders.backends.capabilities import ChunkedCache, HasChunkedCache, Tapped
from decoders.backends.hf import twin_of
from decoders.backends.runner import KVRunner
from decoders.core.declarations import Method, all_methods
from decoders.core.errors import DecodeError
from decoders.core.events import PhaseStarted, Progress
from decoders.core.params import DecodeParams
from decoders.methods.autoregressive import METHOD as AUTOREGRESSIVE
from decoders.methods.shared.common import DecodeContext
from decoders.models.drafts import Draft, DraftCache, DraftTarget, EarlyExit, row_choice, source_of
from decoders.records.run import Iteration, Run, RunResult

if TYPE_CHECKING:
    from decoders.analysis.summary import Summary
    from decoders.backends.hf import Backend
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


def _early_exit_layer(family: Family) -> int | None:
    """The early-exit layer the family's helper drafts with (None: any other draft, or none)."""
    return family.draft.layer if isinstance(family.draft, EarlyExit) and family.helper is not None else None


def _torch_backend(family: Family) -> bool:
    """Whether torch runs the family (llama.cpp has no early exit and no torch modules to draft from)."""
    return family.backend == "torch"


def _own_helper_model(family: Family) -> bool:
    """Whether the family's helper is a model of its own (a transformers module, or a GGUF on llama.cpp)."""
    if getattr(family, "helper_model", None) is not None:
        return True
    return not _torch_backend(family) and family.helper is not None


class Engine:
    """Runs methods on one loaded family; models stay loaded and baselines are measured once."""

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
        self._own_helper = family if _own_helper_model(family) else None
        # the machine's run-to-run noise that widens every spread (`decoders.analysis.calibration`):
        # read on the first run (`find_calibration`); ``calibration_note`` says why there is none
        self.calibration: Calibration | None = None
        self.calibration_note: str | None = None
        self._calibration_read = False
        self.warmed: set[tuple] = set()  # what a consumer has warmed (`warm`) and need not warm again
        # why the suffix memory's file could not be written after the last run (a read-only folder,
        # a full disk): the run stands, its caller says so (`tui-decode run`, the app); None: written
        self.memory_error: str | None = None

    @property
    def has_helper(self) -> bool:
        return self.helper is not None

    @property
    def draft_layers(self) -> int:
        """The main model's layer count when it may draft for itself by early exit (no helper
        model of its own), else 0."""
        if _own_helper_model(self.family) or not _torch_backend(self.family):
            return 0
        layers = int(self.family.main.n_layers or 0)
        return layers if layers > 1 else 0

    @property
    def draft_layer(self) -> int | None:
        """The early-exit layer the helper drafts with (None: any other draft, or none)."""
        return _early_exit_layer(self.family)

    @property
    def draft(self) -> Draft | None:
        """What drafts now, as the draft row names it (None: the family's own helper model, or none)."""
        return row_choice(self.family.draft)

    def set_draft(self, draft: Draft | None) -> None:
        """Draft with ``draft`` from now on (built first if need be: `build_draft`); None: the
        family's own helper model again. The models and the measured baselines stay. Call it
        between runs, never while a run uses the engine."""
        if draft is None:
            own = self._own_helper
            if own is None or self.family.helper is own.helper:
                return
            assert own.helper is not None  # a family with a helper model has its backend
            self._switch(own.draft, own.helper, own.helper_source)
            return
        if isinstance(draft, EarlyExit):
            if not self.draft_layers:
                raise DecodeError(f"{self.family.label} drafts with its own helper model; an early-exit layer "
                                  "applies only to a family without one")
            if not 1 <= draft.layer < self.draft_layers:
                raise DecodeError(f"the draft layer must be in 1..{self.draft_layers - 1}, got {draft.layer}")
        backend = self.build_draft(draft)
        if self.family.helper is not backend:
            self._switch(draft, backend, source_of(draft, backend))

    def _switch(self, draft: Draft | None, backend: Backend, source: str | None) -> None:
        self.family = dataclasses.replace(self.family, helper=backend, helper_source=source, draft=draft)
        self.helper = KVRunner(backend, self.clock)

    def has_draft(self, draft: Draft) -> bool:
        """Whether ``draft`` is built (switching to it then costs nothing)."""
        return draft in self._drafts

    def build_draft(self, draft: Draft):
        """``draft`` of the main model, built by its kind's builder (`decoders.models.drafts`) and
        warmed up once; the main model and the baselines stay. DecodeError says why not (a shape
        the kernel cannot take, too little memory, no head, a llama.cpp family)."""
        return self._drafts.get(draft, DraftTarget.of(self.family))

    def draft_with(self, family: Family) -> None:
        """Draft with ``family``'s helper from now on: a family of the same main model whose helper
        is another draft (the bench's rows). The measured baselines stay.
        Call it between runs, never while a run uses the engine."""
        if family.main is not self.family.main:
            raise ValueError("draft_with takes a family of the same main model")
        if family is self.family:
            return
        self.family = family
        self.helper = KVRunner(family.helper, self.clock) if family.helper is not None else None

    @property
    def helper_model_source(self) -> str | None:
        """Where the family's own helper model came from, when it has one."""
        own = self._own_helper
        return (own.helper_source or "helper model") if own is not None else None

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
            drafts = "--helper SRC, --self-draft int4 or --self-draft-layer L" if _torch_backend(self.family) \
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
        return RunResult(method=run, baseline=baseline, summary=summary, params=params.to_json(), prompt=prompt,
                         prompt_ids=ids, family={**self.family.describe(), "threads": torch.get_num_threads()})

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

    # -- the run-to-run noise calibration --------------------------------------------------------
    def machine(self) -> tuple[str, dict[str, str]]:
        """The key this machine's kept measurements go by, and what it is made of."""
        from decoders.models.machine import machine_key, machine_parts

        parts = machine_parts(self.family)
        return machine_key(parts), parts

    def find_calibration(self) -> Calibration | None:
        """The calibration kept for this machine and model, read once (None: none yet, or the
        file could not be read: ``calibration_note`` says which)."""
        if not self._calibration_read:
            from decoders.models.machine import calibration_path, read_calibrations

            self._calibration_read = True
            kept, problem = read_calibrations()
            self.calibration = kept.get(self.machine()[0])
            self.calibration_note = problem or (None if self.calibration is not None else
                                                f"no run-to-run calibration for this machine in {calibration_path()} "
                                                "yet: spreads are step jitter only")
        return self.calibration

    def calibration_params(self, tokens: int = CALIBRATION_TOKENS) -> DecodeParams:
        """What a calibration run decodes: autoregressive decoding, greedy, ``tokens`` tokens."""
        return DecodeParams(method=AUTOREGRESSIVE.name, max_new_tokens=tokens, record=False).validated()

    def keep_calibration(self, summaries: list[Summary]) -> Calibration:
        """The calibration of these autoregressive-against-itself runs (`calibration_params`),
        kept for this machine and used from the next run on. ValueError when fewer than two
        runs measured a speedup; DecodeError when it cannot be written."""
        import datetime

        from decoders.analysis.calibration import run_noise
        from decoders.models.machine import save_calibration

        measured = [s for s in summaries if s.speedup_decode is not None]
        speeds = [float(s.speedup_decode) for s in measured if s.speedup_decode is not None]
        spreads = [float(s.speedup_spread_steps or s.speedup_spread or 0.0) for s in measured]
        key, parts = self.machine()
        calibration = Calibration(
            key=key, machine=parts, measured=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            runs=speeds, step_spreads=spreads, tokens=max((s.tokens for s in measured), default=0),
            prompt_tokens=max((s.prompt_tokens or 0 for s in measured), default=0), noise=run_noise(speeds, spreads))
        save_calibration(calibration)
        self.calibration, self.calibration_note, self._calibration_read = calibration, None, True
        return calibration

    def forget_calibration(self) -> Calibration | None:
        """Runs from now on use no calibration (a calibration's own runs must not be widened);
        returns the one used so far (`use_calibration` puts it back)."""
        old = self.calibration
        self.calibration, self._calibration_read = None, True
        return old

    def use_calibration(self, calibration: Calibration | None) -> None:
        self.calibration, self._calibration_read = calibration, True

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

    def _run_curve(self, params: DecodeParams, seq: list[int], cancelled: Callable[[], bool] = lambda: False):
        """`cost_curve` for a run of ``params``: none for the baseline method, which verifies
        nothing (its T(k) took 3.3 s of a 13 s `run --method ar --max-new-tokens 2`)."""
        if params.method_def.baseline:
            return None
        return (yield from self.cost_curve(seq, cancelled))

    def cost_curve(self, seq: list[int], cancelled: Callable[[], bool] = lambda: False):
        """The verify-cost curve T(k) at the context of ``seq`` (held in the main cache after a
        run), measured once per context bucket (about 2 s on a small CPU), then reused; None where
        none fits or a cancel came first. A generator (``curve = yield from``): the measurement is
        a phase of its own (`decoders.analysis.timing.curve_phase`), so that a UI shows the run
        done and T(k) being measured, not a run still going."""
        bucket = context_bucket(len(seq))
        if bucket not in self._cost_curves:
            if not seq or len(seq) + CURVE_WIDTHS > self.family.context_length:
                return None
            curve = yield from curve_phase(self.main, seq, cancelled)
            if curve is None:
                return None
            self._cost_curves[bucket] = curve
        return self._cost_curves[bucket] or None

    def known_cost_curve(self, length: int) -> list[float] | None:
        return self._cost_curves.get(context_bucket(length)) or None

    def _probe(self, seq: list[int]) -> list[float]:
        """Milliseconds of a few one-token steps at the end of ``seq`` (`probe_steps`)."""
        return probe_steps(self.main, seq, self.family.context_length)

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

