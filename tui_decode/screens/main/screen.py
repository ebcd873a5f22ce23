"""The main screen: prompt and parameters on the left, the live output, its iterations and their
detail on the right, the run's statistics below the parameters; its keys, and the wiring between
them.

The screen holds an engine (through `LoadedFamily`), never the reverse. Its parts are mixins, each
declaring what it needs from the screen as a Protocol: the layout (`layout.ResponsiveLayout`),
showing a run (`showing.RunView`), a run from ctrl+r to its result (`running.RunLifecycle`; the
state of a run that is streaming lives in a `LiveRun`), saving and opening runs
(`saving.RunFiles`), switching the family (`family.FamilySwitching`) and the three thread workers
(`tui_decode.workers.decode`, `tui_decode.workers.draft`). Here: the keys and the settings.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import TextArea

from decoders.models.drafts import EarlyExit
from decoders.records.run import RunResult
from tui_decode.screens.history_screen import compare_with_baseline, open_history
from tui_decode.screens.keys import QUIT
from tui_decode.screens.main.family import FamilySwitching
from tui_decode.screens.main.layout import ResponsiveLayout, page_tabs
from tui_decode.screens.main.measuring import start_batch, start_calibration, start_repeat, start_sweep
from tui_decode.screens.main.running import RunLifecycle
from tui_decode.screens.main.saving import RunFiles
from tui_decode.screens.main.showing import RunView
from tui_decode.screens.pickers import open_prompt_library
from tui_decode.state.live_run import LiveRun
from tui_decode.state.loaded_family import LoadedFamily
from tui_decode.state.run_history import RunHistory
from tui_decode.state.settings import KNOB_BY_KEY, Settings, draft_length_key, knobs_for
from tui_decode.widgets import (
    AppFooter,
    IterationDetail,
    IterationTable,
    ParamsPane,
    PromptPane,
    StatsPane,
    StatusLine,
    TokenStream,
    ValueEditor,
)
from tui_decode.workers.decode import DecodeWorker, EngineFactory, FamilyLoader, FamilyLoadWorker
from tui_decode.workers.draft import DraftBuildWorker
from tui_decode.workers.messages import WorkerMessage

if TYPE_CHECKING:
    from decoders.models.family import FamilySpec

#: Actions on one-letter keys: off while the prompt editor has focus, so typing stays typing.
LETTER_ACTIONS = frozenset({"cycle_method", "toggle_mode", "draft_length", "toggle_chat_template",
                            "pick_family", "edit_prompt", "toggle_detail", "sweep", "history",
                            "compare_baseline", "pick_prompt", "repeat", "calibrate", "focus_stats", "batch"})


class MainScreen(ResponsiveLayout, RunView, RunLifecycle, RunFiles, FamilySwitching, FamilyLoadWorker, DraftBuildWorker,
                 DecodeWorker, Screen[None]):
    """The workbench: one run shown (finished, cancelled, opened or streaming) and the next one's
    prompt and parameters."""

    # In the footer's order: the focused pane's keys, then these, then the app's (f1). ctrl+q (the app's
    # action) is listed here too, first, where the footer has always shown it.
    BINDINGS = [
        QUIT,
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
        Binding("s", "sweep", "Sweep", tooltip="Run the draft length over up to 8 values and plot each speedup"),
        Binding("e", "edit_prompt", "Edit prompt", show=False),
        Binding("p", "pick_prompt", "Prompts", show=False),  # named in the first screen and the help
        Binding("r", "repeat", "Repeat", show=False, tooltip="Run the current settings 5 times and pool"),
        Binding("d", "toggle_detail", "Detail", show=False),
        Binding("i", "focus_stats", "Statistics", show=False),  # the arrows then scroll its figures
        Binding("h", "history", "History", tooltip="The session's runs; enter compares the last two"),
        Binding("c", "compare_baseline", "Compare", tooltip="The run shown beside its autoregressive baseline"),
        Binding("n", "calibrate", "Calibrate", show=False,
                tooltip="Measure this machine's run-to-run noise (autoregressive against itself, 6 runs)"),
        Binding("b", "batch", "Batch", show=False,
                tooltip="Each method beside autoregressive decoding at batch sizes 1..64; speedup against batch size"),
    ]

    running: var[bool] = var(False, bindings=True)
    measuring: var[bool] = var(False, bindings=True)  # the run's tokens are in; T(k) is measured (running.py)
    loading_family: var[bool] = var(False, bindings=True)  # not `loading`: Widget.loading covers the screen

    def __init__(
        self,
        spec: FamilySpec | None,
        *,
        opened: RunResult | None,
        opened_name: str,
        opened_path: Path | None = None,
        load_family: FamilyLoader,
        engine_factory: EngineFactory,
        runs_folder: Path,
        prompt: str,
        settings: Settings,
        cursor_blink: bool,
    ) -> None:
        super().__init__()
        self.spec = spec
        self.opened = opened
        self.opened_name = opened_name
        self.opened_path = opened_path
        self.load_family = load_family
        self.engine_factory = engine_factory
        self.runs_folder = runs_folder
        self.initial_prompt = prompt
        self.settings = settings
        self.start_settings = settings  # what "edited" is measured against before any run (ctrl+o asks)
        self.cursor_blink = cursor_blink
        self.loaded: LoadedFamily | None = None
        self.result: RunResult | None = None
        self.live: LiveRun | None = None
        self.run_after_load = False
        self.history = RunHistory()  # every run met this session (h lists them, c compares)
        self._decode_lock = threading.Lock()
        self.set_up = asyncio.Event()  # set once the panes are filled and focused

    # -- layout ----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # Kept as attributes: worker messages may still arrive while the app shuts down, when
        # querying the DOM would fail.
        self.prompt_pane = PromptPane(self.initial_prompt, id="prompt-pane", classes="pane")
        self.params_pane = ParamsPane(id="params-pane", classes="pane")
        self.value_editor = ValueEditor(id="value-editor")
        self.stats = StatsPane(id="stats-pane", classes="pane")
        self.stream = TokenStream(id="token-stream", classes="pane")
        self.table = IterationTable(id="iteration-table", classes="pane")
        self.detail = IterationDetail(id="iteration-detail", classes="pane")
        self.status = StatusLine(id="status-line")
        self.footer = AppFooter(compact=True)
        self.page_tabs = page_tabs()  # the narrow layout's pages (see tui_decode.screens.main.layout)
        yield self.page_tabs
        with Horizontal(id="workbench"):
            with Vertical(id="left"):
                yield self.prompt_pane
                yield self.params_pane
                yield self.value_editor
                yield self.stats
            with Vertical(id="right"):
                yield self.stream
                yield self.table
                yield self.detail
        yield self.status
        yield self.footer

    def on_mount(self) -> None:
        self.prompt_pane.editor.cursor_blink = self.cursor_blink
        self.params_pane.editor = self.value_editor  # typed values open at once (see ParamsPane._edit)
        self.app.theme_changed_signal.subscribe(self, self.redraw_run)
        self.apply_layout(self.app.size.width)
        self.set_interval(0.5, self._tick)
        self.apply_settings(self.settings)
        if self.opened is not None:
            path = self.opened_path or (Path(self.opened_name) if self.opened_name else None)
            self.history.record(self.opened, "opened", path)
            self.show_result(self.opened, opened_name=self.opened_name)
            target = self.spec.name if self.spec is not None else "the model"
            self.status.set(f"opened {self.opened_name or 'a saved run'}: browsing without a model; "
                            f"ctrl+r loads {target} and runs", "done")
        elif self.spec is not None:
            self.start_loading(self.spec)
        else:
            self.status.set("no model family given; press f to pick one", "idle")
        self.params_pane.focus()
        self.set_up.set()

    def _tick(self) -> None:
        self.run_tick()  # a prefill's seconds (running.py)
        self.load_tick()  # a quiet load step's seconds (family.py)

    def on_unmount(self) -> None:
        self.restore_threads()

    def check_message_enabled(self, message) -> bool:
        """Worker messages that arrive once the app is leaving (a run cancelled by ctrl+q ends
        with a partial result) change nothing."""
        if isinstance(message, WorkerMessage) and not self.is_attached:
            return False
        return super().check_message_enabled(message)

    # -- keys ----------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        on_main = not self.app.screen_stack or self.app.screen is self  # (the footer asks beneath a modal too)
        if action == "cancel":
            return self.can_cancel() and on_main
        if action in LETTER_ACTIONS and (isinstance(self.focused, TextArea) or not on_main):
            return False
        return True

    def can_cancel(self) -> bool:
        """Whether escape has something to cancel: a run decoding, or one waiting for the model
        (nothing once every token is in and T(k) is measured)."""
        return self.running and not self.measuring or self.run_after_load

    def action_sweep(self) -> None:
        start_sweep(self)

    def action_repeat(self) -> None:
        start_repeat(self)

    def action_calibrate(self) -> None:
        start_calibration(self)

    def action_batch(self) -> None:
        start_batch(self)

    def action_pick_prompt(self) -> None:
        open_prompt_library(self)

    def action_history(self) -> None:
        open_history(self)

    def action_compare_baseline(self) -> None:
        compare_with_baseline(self)

    # -- settings --------------------------------------------------------------------------------
    def apply_settings(self, settings: Settings) -> None:
        self.settings = settings
        self.params_pane.settings = settings
        self.prompt_pane.show_chat_template(settings.params.chat_template)
        self.ensure_draft(settings)  # a self-draft chosen for the first time is built in a worker

    @on(ParamsPane.Changed)
    def params_changed(self, event: ParamsPane.Changed) -> None:
        self.apply_settings(event.settings)

    @on(ParamsPane.EditRequested)
    def edit_requested(self, event: ParamsPane.EditRequested) -> None:
        self.value_editor.start(event.knob, self.settings, event.text, self.params_pane.draft_layers)

    @on(ValueEditor.Done)
    def value_typed(self, event: ValueEditor.Done) -> None:
        if event.value is not None:
            self.apply_settings(self.settings.replace(draft=EarlyExit(layer=event.value))
                                 if event.key == "draft_layer"
                                 else self.settings.with_params(**{event.key: event.value}))
        self.params_pane.focus()

    def set_method(self, method: str) -> None:
        self.apply_settings(self.settings.with_params(method=method))

    def action_cycle_method(self) -> None:
        self._step_knob("method", 1)

    def action_toggle_mode(self) -> None:
        self._step_knob("mode", 1)

    def action_draft_length(self, direction: int) -> None:
        key = draft_length_key(self.settings.params.method)
        if key is None:
            self.notify("Autoregressive decoding drafts nothing; pick another method (m).", severity="warning")
            return
        self._step_knob(key, direction)

    def _step_knob(self, key: str, direction: int) -> None:
        options = self.loaded.draft_options() if self.loaded else 0  # (the methods it can run, too)
        knob = next((k for k in knobs_for(self.settings.params.method) if k.key == key), None) or KNOB_BY_KEY[key]
        self.apply_settings(knob.step(self.settings, direction, options))
        self.params_pane.select_key(key)

    def action_toggle_chat_template(self) -> None:
        on = not self.settings.params.chat_template
        self.apply_settings(self.settings.with_params(chat_template=on))
        if self.narrow and self.page != "setup":  # the prompt pane that says it is on another page
            self.notify("Chat template on: the prompt goes as a user message." if on else
                        "Chat template off: the prompt goes as raw text.", timeout=4)

    def action_edit_prompt(self) -> None:
        self.prompt_pane.editor.focus()

    def action_focus_stats(self) -> None:
        self.stats.focus()  # (its page, when narrow: see ResponsiveLayout.on_descendant_focus)

    def action_toggle_detail(self) -> None:
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(self.detail, container=False)
            self.detail.focus()

    # -- errors ----------------------------------------------------------------------------------
    def report_error(self, message: str) -> None:
        """An engine or input error: a notification and the status line; nothing else changes."""
        self.notify(message, title="Error", severity="error", timeout=10)
        self.status.set(f"error: {message}", "error")
