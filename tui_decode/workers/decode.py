"""The two thread workers behind the main screen: loading a model family and decoding a run.

Each is a mixin for the screen that hosts it: the worker runs in a thread, posts the dataclass
messages of `tui_decode.workers.messages` and touches no widget. torch and transformers are imported
only inside these threads, so the first frame paints before any model loads.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from textual import work
from textual.worker import get_current_worker

from decoders.core.errors import DecodeError
from decoders.core.events import PhaseStarted
from decoders.records.run import RunResult
from tui_decode.state.batching import Batcher
from tui_decode.state.loaded_family import LoadedFamily
from tui_decode.state.settings import Settings
from tui_decode.workers.draw_gate import DrawGate
from tui_decode.workers.messages import (
    FamilyFailed,
    FamilyLoaded,
    FamilyProgress,
    RunBatch,
    RunFailed,
    RunFinished,
    RunPhase,
    RunStopped,
    failure_message,
)

if TYPE_CHECKING:
    from textual.message import Message
    from textual.worker import Worker

    from decoders.engine import Engine
    from decoders.models.family import Family, FamilySpec

FamilyLoader = Callable[["FamilySpec", Callable[[str, "float | None"], None]], "Family"]
EngineFactory = Callable[["Family"], "Engine"]

#: Thread switch interval while a run streams (Python's default is 5 ms). The decode worker
#: needs the GIL between torch ops; while the UI thread draws, each hand-over could otherwise
#: cost it up to 5 ms and make a watched run look slower than it is.
RUN_SWITCH_INTERVAL = 0.0005


def default_family_loader(spec: FamilySpec, progress) -> Family:
    from decoders.models.family import load_family

    return load_family(spec, progress=progress)


def threads_loader(threads: int, load: FamilyLoader = default_family_loader) -> FamilyLoader:
    """``load``, with torch's CPU threads set to ``threads`` first (``tui-decode --threads N``).
    The setting is torch's global one: every thread that decodes later takes it."""

    def loader(spec: FamilySpec, progress) -> Family:
        import torch

        torch.set_num_threads(threads)
        return load(spec, progress)

    return loader


def memory_loader(path: str, mb: int | None, depth: int, load: FamilyLoader = default_family_loader) -> FamilyLoader:
    """``load``, then the suffix memory of the first model it loads kept in ``path``
    (``tui-decode --suffix-memory PATH``): read when the file exists, rewritten after each
    response. Every finished run of the session joins it (`decoders.engine`), across the app's
    runs; a file refused (another model's, damaged) fails that load in one line, the file intact.
    A model loaded later in the session has its own memory, not kept on disk."""
    opened = [False]

    def loader(spec: FamilySpec, progress) -> Family:
        family = load(spec, progress)
        if not opened[0]:
            from decoders.methods.shared.suffix_memory import open_memory_file

            progress(f"reading the suffix memory {path} ...", None)
            open_memory_file(family, path, depth, mb)
            opened[0] = True
        return family

    return loader


def default_engine_factory(family: Family) -> Engine:
    from decoders.engine import Engine

    return Engine(family)


def in_daemon_thread(job: Callable[[], Any], name: str, started: Callable[[threading.Thread], None],
                     idle: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Run ``job`` in a daemon thread and wait for it from the calling thread worker, polling the
    worker's cancellation (and calling ``idle``) every 50 ms, so that quitting never waits for
    the job (a load, a draft build). ``started`` is handed the thread. Returns ``{"value": ...}``,
    ``{"error": one line}`` (a DecodeError's own words, anything else through `failure_message`),
    or ``{}`` if cancelled."""
    worker = get_current_worker()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = job()
        except DecodeError as error:
            outcome["error"] = str(error)
        except Exception as error:  # noqa: BLE001 - any failure must leave the app running
            outcome["error"] = failure_message(error)

    thread = threading.Thread(target=run, name=name, daemon=True)
    started(thread)
    thread.start()
    while thread.is_alive():
        if worker.is_cancelled:
            return {}
        thread.join(0.05)
        idle()
    return outcome


@runtime_checkable
class FamilyLoadHost(Protocol):
    """What `FamilyLoadWorker` needs from the screen that hosts it (and its own members)."""

    load_family: FamilyLoader  # the host's: the tests give a tiny model's
    engine_factory: EngineFactory
    loader_thread: threading.Thread | None

    def post_message(self, message: Message) -> bool: ...


class FamilyLoadWorker:
    """Hosts the worker that loads a family and wraps it in an engine (`LoadedFamily`); the host
    handles the messages it posts (`FamilyProgress`, `FamilyLoaded`, `FamilyFailed`)."""

    load_family: FamilyLoader
    engine_factory: EngineFactory
    loader_thread: threading.Thread | None = None

    def loader_busy(self: FamilyLoadHost) -> bool:
        """Whether a load is still going (it cannot be interrupted)."""
        return self.loader_thread is not None and self.loader_thread.is_alive()

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_in_background(self: FamilyLoadHost, spec: FamilySpec) -> None:
        """Load in a daemon thread and wait for it here, so that quitting never waits for a load."""
        progress = Batcher(lambda items: self.post_message(FamilyProgress(*items[-1])))

        def report(text: str, fraction: float | None = None) -> None:
            progress.add((text, fraction))

        def load() -> LoadedFamily:
            family = self.load_family(spec, report)
            torch = sys.modules.get("torch")
            threads = torch.get_num_threads() if torch is not None else None
            engine = self.engine_factory(family)
            engine.find_calibration()  # read here, off the UI thread (a file, torch's threads)
            return LoadedFamily.wrap(engine, spec, threads)

        outcome = in_daemon_thread(load, "tui-decode-load", lambda thread: setattr(self, "loader_thread", thread),
                                   idle=progress.flush_due)
        if "value" in outcome:
            self.post_message(FamilyLoaded(outcome["value"]))
        elif "error" in outcome:
            self.post_message(FamilyFailed(spec, outcome["error"]))


def warm_once(engine: Engine, prompt: str, params) -> None:
    """`Engine.warm` before the first timed run of a prompt with these settings on this engine
    (its draft included): the first decode of a prompt pays what no later one does, and the
    baseline, which prefills first, would pay it alone. Every surface warms the same way."""
    key = (prompt, repr(sorted(params.to_json().items())), id(engine.family.helper))
    if key not in engine.warmed:
        engine.warm(prompt, params)
        engine.warmed.add(key)


class QuietPoints:
    """The engine's ``idle`` hook for a streamed run (`decoders.engine.Engine.stream`): where
    neither run's clock runs, hand the batch over once its interval has passed, as often before
    the method's step as before the baseline's. Each hand-over waits for the draw, and the step
    after that wait runs cold (caches, the core's clock): always the baseline's, and a live run
    read autoregressive decoding 1.05x faster than itself; flushed where the batch happened to be
    due (the method's points span three steps to the baseline's one), 0.96x."""

    def __init__(self, batch: Batcher, release: Callable[[], object] = lambda: None):
        self.batch = batch
        self.release = release  # lets the UI's loop run again (the draw gate holds it after each hand-over)
        self.counts = {"method": 0, "baseline": 0}

    def __call__(self, next_run: str) -> None:
        if next_run == "end":  # nothing more is timed in this pairing: let the UI run
            self.release()
            return
        if not self.batch.due():
            return
        other = "baseline" if next_run == "method" else "method"
        if self.counts[next_run] > self.counts[other]:
            return  # this kind of point had its turn: the next of the other kind takes the batch
        self.counts[next_run] += 1
        self.batch.flush()


@runtime_checkable
class DecodeHost(Protocol):
    """What `DecodeWorker` needs from the screen that hosts it (and its own members)."""

    _decode_lock: threading.Lock  # the host makes one: one run at a time on its engine
    _switch_interval: float | None
    decode_thread: threading.Thread | None
    _stop_run: threading.Event | None

    def post_message(self, message: Message) -> bool: ...
    def _decode(self, loaded: LoadedFamily, prompt: str, settings: Settings, worker: Worker[None],
                stop: threading.Event) -> None: ...


class DecodeWorker:
    """Hosts the worker that streams one run, and the thread switch interval while it streams.

    The engine runs in a daemon thread of its own that the worker waits for: escape asks the
    engine to stop at its next iteration (the partial run comes back), while quitting cancels the
    worker, which returns at once -- the app never waits for the engine to wind down (a prefill,
    the cost-curve measurement after a run), and the process exits without it.
    """

    _decode_lock: threading.Lock  # the host makes one: one run at a time on its engine
    _switch_interval: float | None = None
    decode_thread: threading.Thread | None = None
    _stop_run: threading.Event | None = None

    def decode_busy(self: DecodeHost) -> bool:
        """Whether the engine is still running (or winding down after a cancel)."""
        return self.decode_thread is not None and self.decode_thread.is_alive()

    @work(thread=True, exclusive=True, group="decode", exit_on_error=False)
    def decode_in_background(self: DecodeHost, loaded: LoadedFamily, prompt: str, settings: Settings) -> None:
        """Stream the engine's events to the UI in batches; the engine checks for a stop at every
        iteration."""
        worker = get_current_worker()
        self._stop_run = stop = threading.Event()
        thread = threading.Thread(target=self._decode, args=(loaded, prompt, settings, worker, stop),
                                  name="tui-decode-run", daemon=True)
        self.decode_thread = thread
        thread.start()
        while thread.is_alive():
            if worker.is_cancelled:  # the app is leaving: do not wait for the engine
                stop.set()
                return
            thread.join(0.02)

    def _decode(self: DecodeHost, loaded: LoadedFamily, prompt: str, settings: Settings, worker: Worker[None],
                stop: threading.Event) -> None:
        cancelled = lambda: stop.is_set() or worker.is_cancelled  # noqa: E731
        # every message waits until it is drawn: the engine is suspended between two timed steps
        gate = DrawGate(self, cancelled)  # type: ignore[arg-type]  # the host is the screen
        batch = Batcher(lambda events: gate.post(RunBatch(events)))
        # between two hand-overs the UI's loop is held: its timers and a draw's leftovers stay off
        # the timed steps (TUI_DECODE_HOLD=0 lets it run, to measure what that costs)
        gate.holding = os.environ.get("TUI_DECODE_HOLD", "1") != "0"
        quiet = QuietPoints(batch, gate.release)
        try:
            with self._decode_lock:
                engine = loaded.engine_for(settings)
                warm_once(engine, prompt, settings.params)  # as run, the bench and the sweep do
                for event in engine.stream(prompt, settings.params, cancelled=cancelled, idle=quiet):
                    if isinstance(event, RunResult):
                        gate.holding = False
                        batch.flush()
                        self.post_message(RunFinished(event, engine.memory_error))
                        return
                    if isinstance(event, PhaseStarted):
                        batch.flush()
                        # a paired phase hands its batches over at the engine's quiet points only
                        batch.auto = not event.paired
                        gate.post(RunPhase(event))
                    else:
                        batch.add(event)
                batch.flush()
            self.post_message(RunStopped())
        except DecodeError as error:
            gate.holding = False
            batch.flush()
            self.post_message(RunFailed(str(error)))
        except Exception as error:  # noqa: BLE001 - out of memory and bugs alike: report, keep running
            gate.holding = False
            batch.flush()
            self.post_message(RunFailed(failure_message(error)))
        finally:
            gate.holding = False
            gate.release()

    def cancel_decode(self: DecodeHost) -> None:
        """Stop the run at the engine's next iteration; the partial run still comes back."""
        if self._stop_run is not None:
            self._stop_run.set()

    def hurry_threads(self: DecodeHost) -> None:
        """Shorten the thread switch interval for the run (see `RUN_SWITCH_INTERVAL`)."""
        if self._switch_interval is None:
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(RUN_SWITCH_INTERVAL)

    def restore_threads(self: DecodeHost) -> None:
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None
