"""The tui-decode app: watch a parallel decoding method run token by token beside its baseline.

The app holds an engine (`decoders.engine.Engine`), never the reverse. Model loading and decoding
run in thread workers that hand their events over in batches (`Batcher`, every ~40 ms), so the
screen stays responsive while a run streams. torch and transformers are imported only inside
those workers: the first frame paints before any model loads.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import DataTable, Footer, TextArea
from textual.worker import get_current_worker

from decoders.errors import DecodeError
from decoders.events import PhaseStarted, Progress
from decoders.params import METHOD_NAMES, METHODS, DecodeParams
from decoders.records import Iteration, RunResult
from tui_decode.session import (
    DEFAULT_PROMPT,
    DRAFT_LENGTH_KNOB,
    KNOB_BY_KEY,
    Batcher,
    LoadedFamily,
    Settings,
    helper_description,
    live_figures,
    run_file_stem,
    run_tokens,
    runs_dir,
    saved_runs,
)
from tui_decode.widgets import (
    DetailContext,
    IterationDetail,
    IterationTable,
    ParamsPane,
    PromptPane,
    StatsPane,
    StatusLine,
    TokenStream,
    family_picker,
    legend_markup,
    run_picker,
)

if TYPE_CHECKING:
    from decoders.engine import Engine
    from decoders.family import Family, FamilySpec

FamilyLoader = Callable[["FamilySpec", Callable[[str, "float | None"], None]], "Family"]
EngineFactory = Callable[["Family"], "Engine"]

#: Thread switch interval while a run streams (Python's default is 5 ms). The decode worker
#: needs the GIL between torch ops; while the UI thread draws, each hand-over could otherwise
#: cost it up to 5 ms and make a watched run look slower than it is.
RUN_SWITCH_INTERVAL = 0.0005

#: While a run streams, the token stream and the status line take every batch; the table and the
#: live figures catch up at most this often (seconds), and at the end of the run. Their redraws
#: cost tens of milliseconds on a small CPU: time the decode worker (measured against a baseline
#: decoded while the screen was quiet) would otherwise lose, making the method look slower.
SLOW_PANE_INTERVAL = 0.5

#: Actions on one-letter keys: off while the prompt editor has focus, so typing stays typing.
LETTER_ACTIONS = frozenset({"cycle_method", "toggle_mode", "draft_length", "toggle_chat_template",
                            "pick_family", "edit_prompt", "toggle_detail"})


def default_family_loader(spec: FamilySpec, progress) -> Family:
    from decoders.family import load_family

    return load_family(spec, progress=progress)


def default_engine_factory(family: Family) -> Engine:
    from decoders.engine import Engine

    return Engine(family)


def failure_message(error: BaseException) -> str:
    """One line for an unexpected failure inside a worker (out of memory above all)."""
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, MemoryError) or "out of memory" in text.lower():
        return (f"out of memory ({text[:160]}); lower max new tokens, shorten the prompt, "
                "or pick a smaller family (f)")
    return f"{type(error).__name__}: {text[:200]}"


class TuiDecodeApp(App[int]):
    """Prompt and parameters on the left, the live output, its iterations and their detail on the
    right, the run's statistics below the parameters."""

    CSS_PATH = "app.tcss"
    TITLE = "tui-decode"
    BINDINGS = [
        Binding("ctrl+r", "run", "Run", priority=True, tooltip="Decode the prompt with the chosen method"),
        Binding("escape", "cancel", "Cancel", priority=True, tooltip="Stop the run at the next iteration"),
        Binding("ctrl+s", "save", "Save", priority=True, tooltip="Save the run as JSON and an SVG screenshot"),
        Binding("ctrl+o", "open_run", "Open", priority=True, tooltip="Open a saved run"),
        Binding("f", "pick_family", "Family"),
        Binding("m", "cycle_method", "Method"),
        Binding("g", "toggle_mode", "Mode"),
        Binding("left_square_bracket", "draft_length(-1)", "Draft length", key_display="[",
                group=Binding.Group("Draft length", compact=True)),
        Binding("right_square_bracket", "draft_length(1)", "Draft length", key_display="]",
                group=Binding.Group("Draft length", compact=True)),
        Binding("t", "toggle_chat_template", "Template"),
        Binding("e", "edit_prompt", "Edit prompt", show=False),
        Binding("d", "toggle_detail", "Detail", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True, tooltip="Quit at once, even mid-run"),
    ]

    running: var[bool] = var(False, bindings=True)
    loading: var[bool] = var(False, bindings=True)

    # -- messages from the workers ---------------------------------------------------------------
    class FamilyProgress(Message):
        """The loader's latest progress line (throttled like run batches)."""

        def __init__(self, text: str, fraction: float | None) -> None:
            super().__init__()
            self.text = text
            self.fraction = fraction

    class FamilyLoaded(Message):
        """A family loaded; its engine is ready to run."""

        def __init__(self, loaded: LoadedFamily) -> None:
            super().__init__()
            self.loaded = loaded

    class FamilyFailed(Message):
        """A family did not load; the one loaded before stays in use."""

        def __init__(self, spec: FamilySpec, error: str) -> None:
            super().__init__()
            self.spec = spec
            self.error = error

    class RunPhase(Message):
        """The run moved to its baseline or its method phase."""

        def __init__(self, phase: PhaseStarted) -> None:
            super().__init__()
            self.phase = phase

    class RunBatch(Message):
        """Iterations and progress gathered over one batch interval, in order."""

        def __init__(self, events: list[Iteration | Progress]) -> None:
            super().__init__()
            self.events = events

    class RunFinished(Message):
        """The run's result: complete, or partial after a cancel in the method phase."""

        def __init__(self, result: RunResult) -> None:
            super().__init__()
            self.result = result

    class RunStopped(Message):
        """Cancelled before the method phase: there is no partial run to show."""

    class RunFailed(Message):
        """The engine refused the input or failed; the message is one line."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self,
        spec: FamilySpec | None = None,
        *,
        opened: RunResult | None = None,
        opened_name: str = "",
        load_family: FamilyLoader | None = None,
        engine_factory: EngineFactory | None = None,
        runs_folder: Path | None = None,
        prompt: str = DEFAULT_PROMPT,
        settings: Settings | None = None,
        cursor_blink: bool = True,
    ) -> None:
        super().__init__()
        self.spec = spec
        self.opened = opened
        self.opened_name = opened_name
        self.load_family = load_family or default_family_loader
        self.engine_factory = engine_factory or default_engine_factory
        self.runs_folder = runs_folder or runs_dir()
        self.initial_prompt = prompt
        self.settings = settings or Settings()
        self.cursor_blink = cursor_blink
        self.loaded: LoadedFamily | None = None
        self.result: RunResult | None = None
        self.live_iterations: list[Iteration] = []
        self.live_params: DecodeParams | None = None
        self.live_prompt = ""
        self.pending_rows: list[Iteration] = []
        self.slow_panes_at = 0.0
        self.views_cleared = False  # the running method has replaced the run shown before
        self.run_after_load = False
        self.run_started = 0.0
        self.loader_thread: threading.Thread | None = None
        self._decode_lock = threading.Lock()
        self._switch_interval: float | None = None
        self._main_screen: Screen | None = None

    # -- layout ----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # Kept as attributes: worker messages may still arrive while the app shuts down, when
        # querying the DOM would fail.
        self.prompt_pane = PromptPane(self.initial_prompt, id="prompt-pane", classes="pane")
        self.params_pane = ParamsPane(id="params-pane", classes="pane")
        self.stats = StatsPane(id="stats-pane", classes="pane")
        self.stream = TokenStream(id="token-stream", classes="pane")
        self.table = IterationTable(id="iteration-table", classes="pane")
        self.detail = IterationDetail(id="iteration-detail", classes="pane")
        self.status = StatusLine(id="status-line")
        with Horizontal(id="workbench"):
            with Vertical(id="left"):
                yield self.prompt_pane
                yield self.params_pane
                yield self.stats
            with Vertical(id="right"):
                yield self.stream
                yield self.table
                yield self.detail
        yield self.status
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._main_screen = self.screen
        self.prompt_pane.border_title = "Prompt"
        self.params_pane.border_title = "Parameters"
        self.stats.border_title = "Statistics"
        self.stream.border_title = "Output"
        self.stream.border_subtitle = legend_markup()
        self.table.border_title = "Iterations"
        self.detail.border_title = "Iteration detail"
        self.prompt_pane.editor.cursor_blink = self.cursor_blink
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self._apply_settings(self.settings)
        if self.opened is not None:
            self.show_result(self.opened, opened_name=self.opened_name)
            target = self.spec.name if self.spec is not None else "the model"
            self.status.set(f"opened {self.opened_name or 'a saved run'}: browsing without a model; "
                            f"ctrl+r loads {target} and runs", "done")
        elif self.spec is not None:
            self.start_loading(self.spec)
        else:
            self.status.set("no model family given; press f to pick one", "idle")
        self.params_pane.focus()

    def _theme_changed(self, theme: object) -> None:
        """Table rows and figures keep the colours they were drawn with: draw them again."""
        if self.running:
            return
        row = self.table.cursor_row
        self.table.show_iterations(list(self.table.iterations))
        self.table.select_iteration(row)
        self._show_detail(row)
        if self.result is not None:
            self.stats.show_result(self.result)

    # -- bindings --------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        on_main = self._main_screen is None or self.screen is self._main_screen
        if action == "cancel":
            return (self.running or self.run_after_load) and on_main
        if action in LETTER_ACTIONS:
            if isinstance(self.focused, TextArea) or not on_main:
                return False
        return True

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Run", "Decode the prompt with the chosen method (ctrl+r)", self.action_run)
        yield SystemCommand("Cancel run", "Stop the run at the next iteration; the partial run stays (escape)",
                            self.action_cancel)
        yield SystemCommand("Save run", f"Save the run as JSON + SVG in {self.runs_folder} (ctrl+s)",
                            self.action_save)
        yield SystemCommand("Open a saved run", "Browse a run saved earlier, no model needed (ctrl+o)",
                            self.action_open_run)
        yield SystemCommand("Switch model family", "Load another main/helper pair (f)", self.action_pick_family)
        for method in METHODS:
            yield SystemCommand(f"Method: {METHOD_NAMES[method]}", f"Use {METHOD_NAMES[method].lower()} decoding",
                                lambda method=method: self.set_method(method))
        yield SystemCommand("Toggle greedy / sampling", "Switch the decoding mode (g)", self.action_toggle_mode)
        yield SystemCommand("Longer draft", "Raise γ / k / m by one (])", lambda: self.action_draft_length(1))
        yield SystemCommand("Shorter draft", "Lower γ / k / m by one ([)", lambda: self.action_draft_length(-1))
        yield SystemCommand("Toggle chat template", "Wrap the prompt in the chat template, or send it raw (t)",
                            self.action_toggle_chat_template)
        yield SystemCommand("Show iteration detail", "Maximise the selected iteration's detail (d)",
                            self.action_toggle_detail)

    # -- settings --------------------------------------------------------------------------------
    def _apply_settings(self, settings: Settings) -> None:
        self.settings = settings
        self.params_pane.settings = settings
        self.prompt_pane.show_chat_template(settings.params.chat_template)

    @on(ParamsPane.Changed)
    def params_changed(self, event: ParamsPane.Changed) -> None:
        self._apply_settings(event.settings)

    def set_method(self, method: str) -> None:
        self._apply_settings(self.settings.with_params(method=method))

    def action_cycle_method(self) -> None:
        self._step_knob("method", 1)

    def action_toggle_mode(self) -> None:
        self._step_knob("mode", 1)

    def action_draft_length(self, direction: int) -> None:
        key = DRAFT_LENGTH_KNOB.get(self.settings.params.method)
        if key is None:
            self.notify("Autoregressive decoding drafts nothing; pick another method (m).", severity="warning")
            return
        self._step_knob(key, direction)

    def _step_knob(self, key: str, direction: int) -> None:
        draft_layers = self.loaded.draft_layers if self.loaded else 0
        self._apply_settings(KNOB_BY_KEY[key].step(self.settings, direction, draft_layers))
        self.params_pane.select_key(key)

    def action_toggle_chat_template(self) -> None:
        self._apply_settings(self.settings.with_params(chat_template=not self.settings.params.chat_template))

    def action_edit_prompt(self) -> None:
        self.prompt_pane.editor.focus()

    def action_toggle_detail(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
        else:
            self.screen.maximize(self.detail, container=False)
            self.detail.focus()

    # -- errors ----------------------------------------------------------------------------------
    def report_error(self, message: str) -> None:
        """An engine or input error: a notification and the status line; nothing else changes."""
        self.notify(message, title="Error", severity="error", timeout=10)
        self.status.set(f"error: {message}", "error")

    # -- loading a family ------------------------------------------------------------------------
    def start_loading(self, spec: FamilySpec) -> None:
        if self.loading:
            self.notify("A model family is already loading.", severity="warning")
            return
        self.loading = True
        self.status.set(f"loading {spec.label or spec.name} …", "busy", 0.0)
        self.prompt_pane.show_family(
            self.loaded.engine.family.describe() if self.loaded else {"label": spec.label or spec.main},
            note=f"loading {spec.name} …")
        self.load_in_background(spec)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def load_in_background(self, spec: FamilySpec) -> None:
        """Load in a daemon thread and wait for it here, so that quitting never waits for a load."""
        worker = get_current_worker()
        outcome: dict[str, Any] = {}
        progress = Batcher(lambda items: self.post_message(self.FamilyProgress(*items[-1])))

        def load() -> None:
            try:
                family = self.load_family(spec, lambda text, fraction=None: progress.add((text, fraction)))
                torch = sys.modules.get("torch")
                threads = torch.get_num_threads() if torch is not None else None
                outcome["loaded"] = LoadedFamily.wrap(self.engine_factory(family), spec, threads)
            except DecodeError as error:
                outcome["error"] = str(error)
            except Exception as error:  # noqa: BLE001 - any failure must leave the app running
                outcome["error"] = failure_message(error)

        thread = threading.Thread(target=load, name="tui-decode-load", daemon=True)
        self.loader_thread = thread
        thread.start()
        while thread.is_alive():
            if worker.is_cancelled:
                return
            thread.join(0.05)
        if "loaded" in outcome:
            self.post_message(self.FamilyLoaded(outcome["loaded"]))
        else:
            self.post_message(self.FamilyFailed(spec, outcome.get("error", "the load ended without a family")))

    @on(FamilyProgress)
    def family_progress(self, event: FamilyProgress) -> None:
        if self.loading:
            self.status.set(event.text, "busy", event.fraction)

    @on(FamilyLoaded)
    def family_loaded(self, event: FamilyLoaded) -> None:
        self.loading = False
        self.loaded = loaded = event.loaded
        self.spec = loaded.spec or self.spec
        described = loaded.engine.family.describe()
        self.prompt_pane.show_family(described, threads=loaded.threads)
        self.params_pane.draft_layers = loaded.draft_layers
        self.params_pane.helper_label = helper_description(described)
        self._apply_settings(self.settings.replace(draft_layer=loaded.start_layer()))
        method = METHOD_NAMES[self.settings.params.method]
        self.status.set(f"ready: {loaded.label} on {described.get('device')} · {described.get('dtype')}; "
                        f"ctrl+r runs {method}", "idle")
        if self.run_after_load:
            self.run_after_load = False
            self.action_run()

    @on(FamilyFailed)
    def family_failed(self, event: FamilyFailed) -> None:
        self.loading = False
        self.run_after_load = False
        self.report_error(event.error)
        if self.loaded is not None:
            self.prompt_pane.show_family(self.loaded.engine.family.describe(), threads=self.loaded.threads)
            self.spec = self.loaded.spec
            self.status.set(f"could not load {event.spec.name}; still using {self.loaded.label}", "error")
        else:
            self.prompt_pane.show_family({}, note=f"{event.spec.name} failed to load; f picks another")

    def action_pick_family(self) -> None:
        if self.running or self.loading:
            self.notify("Wait for the current run or load to end (escape cancels a run).", severity="warning")
            return
        try:
            from decoders.families import all_families, config_path

            families = all_families()
        except DecodeError as error:
            self.report_error(str(error))
            return
        current = self.spec.name if self.spec is not None else None

        def picked(name: str | None) -> None:
            if name is not None and name in families:
                self.start_loading(families[name])

        self.push_screen(family_picker(families, current, config_path()), picked)

    # -- running ---------------------------------------------------------------------------------
    def action_run(self) -> None:
        if self.running:
            self.notify("A run is already going; escape cancels it.", severity="warning")
            return
        prompt = self.prompt_pane.text
        settings = self.settings
        try:
            if not prompt.strip():
                raise DecodeError("the prompt is empty; type a prompt in the Prompt pane (e edits it)")
            settings.params.validated()
        except DecodeError as error:
            self.report_error(str(error))
            return
        if self.loaded is None:
            if self.spec is None:
                self.report_error("no model family is loaded; press f to pick one")
                return
            self.run_after_load = True
            if not self.loading:
                self.start_loading(self.spec)
            else:
                self.notify("The run starts as soon as the model has loaded.")
            return
        self.running = True
        if self._switch_interval is None:
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(RUN_SWITCH_INTERVAL)
        self.run_started = time.monotonic()
        self.live_iterations = []
        self.pending_rows = []
        self.views_cleared = False
        self.live_params = settings.params
        self.live_prompt = prompt
        self.status.set("starting …", "busy", 0.0)
        self.decode_in_background(self.loaded, prompt, settings)

    @work(thread=True, exclusive=True, group="decode", exit_on_error=False)
    def decode_in_background(self, loaded: LoadedFamily, prompt: str, settings: Settings) -> None:
        """Stream the engine's events to the UI in batches; the engine checks for cancellation
        at every iteration."""
        worker = get_current_worker()
        batch = Batcher(lambda events: self.post_message(self.RunBatch(events)))
        try:
            with self._decode_lock:
                engine = loaded.engine_for(settings)
                for event in engine.stream(prompt, settings.params, cancelled=lambda: worker.is_cancelled):
                    if isinstance(event, RunResult):
                        batch.flush()
                        self.post_message(self.RunFinished(event))
                        return
                    if isinstance(event, PhaseStarted):
                        batch.flush()
                        self.post_message(self.RunPhase(event))
                    else:
                        batch.add(event)
                batch.flush()
            self.post_message(self.RunStopped())
        except DecodeError as error:
            batch.flush()
            self.post_message(self.RunFailed(str(error)))
        except Exception as error:  # noqa: BLE001 - out of memory and bugs alike: report, keep running
            batch.flush()
            self.post_message(self.RunFailed(failure_message(error)))

    def action_cancel(self) -> None:
        if self.run_after_load:
            self.run_after_load = False
            self.status.set("the run waiting for the model is cancelled; the model keeps loading", "cancelled")
            return
        if self.running:
            self.workers.cancel_group(self, "decode")
            self.status.set("cancelling at the next iteration …", "busy")

    def _run_ended(self) -> None:
        self.running = False
        self._restore_switch_interval()

    def _restore_switch_interval(self) -> None:
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None

    def on_unmount(self) -> None:
        self._restore_switch_interval()

    @on(RunPhase)
    def run_phase(self, event: RunPhase) -> None:
        phase = event.phase
        if phase.phase == "baseline":
            if phase.cached:
                self.status.set("baseline: reusing the autoregressive run measured for this prompt", "busy", 0.0)
            else:
                self.status.set(f"baseline: autoregressive reference, 0/{phase.max_new_tokens} tokens", "busy", 0.0)
            return
        self.views_cleared = True
        self.stream.clear()
        self.table.clear_iterations()
        self.detail.show(None, DetailContext())
        self.stream.border_title = f"Output · {METHOD_NAMES.get(phase.label, phase.label)} (running)"
        self.stats.show_live(live_figures([]), "running")
        self.status.set(f"{METHOD_NAMES.get(phase.label, phase.label)}: 0/{phase.max_new_tokens} tokens", "busy", 0.0)

    @on(RunBatch)
    def run_batch(self, event: RunBatch) -> None:
        iterations = [e for e in event.events if isinstance(e, Iteration)]
        progress = [e for e in event.events if isinstance(e, Progress)]
        if progress:
            last = progress[-1]
            self.status.set(f"baseline: autoregressive reference, {last.tokens}/{last.total} tokens", "busy",
                            last.tokens / max(last.total, 1))
        if not iterations:
            return
        self.live_iterations.extend(iterations)
        self.stream.append_iterations(iterations)
        self.pending_rows.extend(iterations)
        if time.monotonic() - self.slow_panes_at >= SLOW_PANE_INTERVAL:
            self._flush_slow_panes()
        params = self.live_params or self.settings.params
        tokens = self.stream.token_count
        self.status.set(f"{METHOD_NAMES[params.method]}: {tokens}/{params.max_new_tokens} tokens", "busy",
                        tokens / max(params.max_new_tokens, 1))

    def _flush_slow_panes(self) -> None:
        """Bring the iteration table and the live figures up to date with the stream."""
        if self.pending_rows:
            rows, self.pending_rows = self.pending_rows, []
            self.table.add_iterations(rows)
        if self.running:
            self.stats.show_live(live_figures(self.live_iterations), "running")
        self.slow_panes_at = time.monotonic()

    @on(RunFinished)
    def run_finished(self, event: RunFinished) -> None:
        self._run_ended()
        self._flush_slow_panes()
        result = event.result
        seconds = time.monotonic() - self.run_started
        self.show_result(result, streamed=True)
        s = result.summary.to_json()
        speed = s.get("speedup_wall")
        speed_text = f"{speed:.2f}x vs autoregressive" if speed is not None else "no timing"
        if result.method.finish == "cancelled":
            self.status.set(f"cancelled after {s.get('tokens')} tokens ({seconds:.1f} s); the partial run stays: "
                            f"{speed_text}", "cancelled")
        else:
            self.status.set(f"done in {seconds:.1f} s: {s.get('tokens')} tokens, {speed_text}", "done")

    @on(RunStopped)
    def run_stopped(self, event: RunStopped) -> None:
        self._run_ended()
        self.status.set("cancelled during the baseline; the run shown before stays", "cancelled")

    @on(RunFailed)
    def run_failed(self, event: RunFailed) -> None:
        self._run_ended()
        self._flush_slow_panes()
        self.report_error(event.error)
        if self.result is not None and self.views_cleared:
            self.show_result(self.result)  # the failed run had cleared the views: bring the last run back

    # -- showing a run ---------------------------------------------------------------------------
    def show_result(self, result: RunResult, opened_name: str = "", streamed: bool = False) -> None:
        """Fill every pane from ``result`` (a finished, cancelled or opened run)."""
        self.result = result
        run = result.method
        if not (streamed and self.table.row_count == len(run.iters) and self.stream.token_count == len(run.ids)):
            self.stream.show_tokens(run_tokens(run))
            self.table.show_iterations(run.iters)
        if streamed and self.table.cursor_row == 0:  # not moved during the run: show the newest iteration
            self.table.select_last()
        state = " (cancelled)" if run.finish == "cancelled" else ""
        self.stream.border_title = f"Output · {run.label}{state}"
        self.stream.marked_iteration = self.table.cursor_row if self.table.row_count else None
        self.stream.refresh()
        self.stats.show_result(result)
        self._show_detail(self.table.cursor_row)
        if opened_name:
            self.prompt_pane.text = result.prompt
            params = DecodeParams.from_json(result.params) if result.params else self.settings.params
            self._apply_settings(self.settings.replace(params=params))
            if self.loaded is None:
                self.prompt_pane.show_family(result.family, note="saved run")
                self.params_pane.helper_label = helper_description(result.family)

    def detail_context(self) -> DetailContext:
        result = self.result if not self.running else None
        if result is not None:
            return DetailContext(method=result.method.method, prompt=result.prompt,
                                 prompt_tokens=len(result.prompt_ids), output_tokens=list(result.method.tokens))
        params = self.live_params or self.settings.params
        tokens = [e.text for it in self.live_iterations for e in it.emit]
        return DetailContext(method=params.method, prompt=self.live_prompt, prompt_tokens=None, output_tokens=tokens)

    def _show_detail(self, row: int) -> None:
        iterations = self.table.iterations
        if 0 <= row < len(iterations):
            self.detail.show(iterations[row], self.detail_context())
        else:
            self.detail.show(None, DetailContext())

    @on(DataTable.RowHighlighted, "#iteration-table")
    def row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = event.cursor_row
        self._show_detail(row)
        if not (self.running and row == self.table.row_count - 1):  # following a live run: the stream marks
            self.stream.mark_iteration(row)                          # its newest iteration itself

    @on(DataTable.RowSelected, "#iteration-table")
    def row_selected(self, event: DataTable.RowSelected) -> None:
        self.screen.maximize(self.detail, container=False)
        self.detail.focus()

    @on(TokenStream.IterationChosen)
    def token_chosen(self, event: TokenStream.IterationChosen) -> None:
        self.table.select_iteration(event.iteration)

    # -- saving and opening ----------------------------------------------------------------------
    def action_save(self) -> None:
        if self.result is None:
            self.notify("Nothing to save yet: run a method first (ctrl+r).", severity="warning")
            return
        folder = self.runs_folder
        stem = run_file_stem(self.result, folder)
        try:
            self.result.save(folder / f"{stem}.json")
            self.save_screenshot(filename=f"{stem}.svg", path=str(folder))
        except OSError as error:
            self.report_error(f"cannot save in {folder}: {error.strerror or error}; set TUI_DECODE_RUNS_DIR "
                              "to a writable folder")
            return
        self.status.set(f"saved {stem}.json and {stem}.svg in {folder}", "done")
        self.notify(f"{stem}.json + .svg in {folder}", title="Saved")

    def action_open_run(self) -> None:
        if self.running:
            self.notify("Wait for the run to end (escape cancels it).", severity="warning")
            return
        runs = saved_runs(self.runs_folder)
        if not runs:
            self.notify(f"No saved runs in {self.runs_folder} yet; ctrl+s saves the run shown.",
                        severity="warning")
            return

        def picked(path: str | None) -> None:
            if path is not None:
                self.open_path(Path(path))

        self.push_screen(run_picker(runs, self.runs_folder), picked)

    def open_path(self, path: Path) -> None:
        try:
            result = RunResult.load(path)
        except DecodeError as error:
            self.report_error(str(error))
            return
        self.show_result(result, opened_name=path.name)
        self.status.set(f"opened {path.name}", "done")

    # -- leaving ---------------------------------------------------------------------------------
    def loader_busy(self) -> bool:
        return self.loader_thread is not None and self.loader_thread.is_alive()


def run_app(args) -> int:
    """`tui-decode` without a subcommand: open the app (on a saved run with ``--open``)."""
    from tui_decode.cli import family_spec

    opened = RunResult.load(args.open) if getattr(args, "open", None) else None
    spec = family_spec(args)
    app = TuiDecodeApp(spec, opened=opened, opened_name=Path(args.open).name if opened else "")
    code = app.run() or 0
    if app.loader_busy():
        # A model load cannot be interrupted; leave without waiting for it (it holds no files open
        # for writing that matter: the GGUF conversion writes to a temporary folder first).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
