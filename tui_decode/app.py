"""The tui-decode app: watch a parallel decoding method run token by token beside its baseline.

The app itself holds the theme, the command palette and the app-wide keys (help, quit); everything
on screen, its keys and the workers behind it, belong to `MainScreen`. torch and transformers are imported only
inside the workers: the first frame paints before any model loads.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.driver import Driver
from textual.screen import Screen
from textual.widgets import TextArea

from decoders.core.params import METHOD_NAMES, METHODS
from decoders.records.run import RunResult
from tui_decode.screens.help_screen import HelpScreen
from tui_decode.screens.keys import QUIT
from tui_decode.screens.main import MainScreen
from tui_decode.screens.main.family import REMEASURE_COMMAND
from tui_decode.state.crash_report import report_crash
from tui_decode.state.runs_folder import runs_dir
from tui_decode.state.settings import DEFAULT_PROMPT, Settings, runnable_methods
from tui_decode.state.token_text import shown_controls
from tui_decode.workers.decode import (
    EngineFactory,
    FamilyLoader,
    default_engine_factory,
    default_family_loader,
    memory_loader,
    threads_loader,
)

if TYPE_CHECKING:
    from decoders.models.family import FamilySpec


class TuiDecodeApp(App[int]):
    """The theme, the command palette and the app-wide keys (help, quit); the main screen
    (`MainScreen`) binds and handles the rest."""

    CSS_PATH = "app.tcss"
    TITLE = "tui-decode"
    BINDINGS = [
        QUIT,
        Binding("f1", "help", "Help", tooltip="What every figure and colour means"),
        Binding("question_mark", "help_key", "Help", show=False),
    ]

    def notify(self, message: str, *args: Any, **kwargs: Any) -> None:
        """As Textual's, but the message is plain text, never markup (a file's name such as
        "run [/v2].json" in it was a MarkupError that ended the app), and a control character in
        it (a name may hold an ESC sequence) is drawn as its picture, not sent to the terminal."""
        kwargs["title"] = shown_controls(kwargs.get("title", ""))
        kwargs["markup"] = False  # (a screen's notify passes markup=True on)
        super().notify(shown_controls(message), *args, **kwargs)

    def __init__(
        self,
        spec: FamilySpec | None = None,
        *,
        opened: RunResult | None = None,
        opened_name: str = "",
        opened_path: Path | None = None,
        load_family: FamilyLoader | None = None,
        engine_factory: EngineFactory | None = None,
        runs_folder: Path | None = None,
        prompt: str = DEFAULT_PROMPT,
        settings: Settings | None = None,
        cursor_blink: bool = True,
    ) -> None:
        super().__init__()
        # What the app starts with; once it runs, the main screen holds the current state.
        self.spec = spec
        self.opened = opened
        self.opened_name = opened_name
        self.opened_path = opened_path  # the file it came from: the history lists it once, not again as saved
        self.load_family = load_family or default_family_loader
        self.engine_factory = engine_factory or default_engine_factory
        self.runs_folder = runs_folder or runs_dir()
        self.initial_prompt = prompt
        self.initial_settings = settings or Settings()
        self.cursor_blink = cursor_blink
        self._main_screen: MainScreen | None = None
        #: The unexpected exception that ended the app, if one did (``run_app`` reports it).
        self.crash: BaseException | None = None
        #: Whether the app started in a terminal (mounted): `run_app` then leaves without the
        #: interpreter's teardown.
        self.started = False

    def _handle_exception(self, error: Exception) -> None:
        # Textual would print a full traceback (with locals) over the terminal on exit. The app
        # keeps it for the crash report instead: `run_app` prints one line naming the file.
        # (Private hook of textual 8.2.8, pinned; the pilot behaviour it keeps is `_exception`.)
        self._return_code = 1
        if self.crash is None:
            self.crash = error
        if self._exception is None:
            self._exception = error
            self._exception_event.set()
        self.bell()
        self._close_messages_no_wait()

    def get_driver_class(self) -> type[Driver]:
        """Textual's terminal driver, with key bursts read as pastes (`tui_decode.driver`): on POSIX,
        unless TEXTUAL_DRIVER names another."""
        from textual import constants

        driver = super().get_driver_class()
        if constants.DRIVER is None and sys.platform != "win32":
            from tui_decode.driver import BurstDriver

            return BurstDriver
        return driver

    def get_default_screen(self) -> MainScreen:
        self._main_screen = MainScreen(
            self.spec, opened=self.opened, opened_name=self.opened_name, opened_path=self.opened_path,
            load_family=self.load_family,
            engine_factory=self.engine_factory, runs_folder=self.runs_folder, prompt=self.initial_prompt,
            settings=self.initial_settings, cursor_blink=self.cursor_blink)
        return self._main_screen

    async def on_mount(self) -> None:
        self.started = True
        if not self.is_headless:  # a terminal of its own (a pilot's app leaves the test's signals alone)
            from tui_decode.state.leaving import leave_on_signals

            leave_on_signals(self._leave_now)
        # The main screen composes and mounts in its own task; the app is ready (keys, pilots)
        # only once it has, so that no early key meets a half-built screen. An exception before
        # then (a saved run the panes cannot show) must end the app with its crash report, not
        # leave it waiting for a screen that never comes.
        import asyncio

        waits = {asyncio.ensure_future(self.main_screen.set_up.wait()),
                 asyncio.ensure_future(self._exception_event.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    @property
    def main_screen(self) -> MainScreen:
        """The workbench screen (also while a picker or the command palette is above it)."""
        if self._main_screen is None:
            raise RuntimeError("the app has not started: there is no main screen yet")
        return self._main_screen

    # -- app-wide keys ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "help_key":  # a one-letter key: off while a text editor has focus, and over other screens
            main = self._main_screen
            on_main = main is None or not self.screen_stack or self.screen is main
            return on_main and not isinstance(self.focused, TextArea)
        return True

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_help_key(self) -> None:
        self.action_help()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = self.main_screen
        yield SystemCommand("Run", "Decode the prompt with the chosen method (ctrl+r)", main.action_run)
        if main.can_cancel():  # offered only when a run goes (or waits for the model)
            yield SystemCommand("Cancel run", "Stop the run at the next iteration; the partial run stays (escape)",
                                main.action_cancel)
        yield SystemCommand("Save run", f"Save the run as JSON + SVG in {self.runs_folder} (ctrl+s)",
                            main.action_save)
        yield SystemCommand("Open a saved run", "Browse a run saved earlier, no model needed (ctrl+o)",
                            main.action_open_run)
        yield SystemCommand("Switch model family", "Load another main/helper pair (f)", main.action_pick_family)
        yield SystemCommand(REMEASURE_COMMAND, "Load the family again, timing its target dtype and drafts on this "
                            "machine afresh; the new choice is kept for later starts", main.action_remeasure)
        runnable = runnable_methods(main.params_pane.draft_options)  # none that drafts, where nothing can
        for method in (m for m in METHODS if m in runnable):
            yield SystemCommand(f"Method: {METHOD_NAMES[method]}", f"Use {METHOD_NAMES[method].lower()} decoding",
                                lambda method=method: main.set_method(method))
        yield SystemCommand("Toggle greedy / sampling", "Switch the decoding mode (g)", main.action_toggle_mode)
        yield SystemCommand("Longer draft", "Raise γ / k / m by one (])", lambda: main.action_draft_length(1))
        yield SystemCommand("Shorter draft", "Lower γ / k / m by one ([)", lambda: main.action_draft_length(-1))
        yield SystemCommand("Toggle chat template", "Wrap the prompt in the chat template, or send it raw (t)",
                            main.action_toggle_chat_template)
        yield SystemCommand("Sweep the draft length", "Run up to 8 draft lengths and plot each speedup (s)",
                            main.action_sweep)
        yield SystemCommand("Batch sizes", "Each method beside autoregressive decoding at batch > 1: speedup against "
                            "batch size, break-even marked (b)", main.action_batch)
        yield SystemCommand("Show iteration detail", "Maximise the selected iteration's detail (d)",
                            main.action_toggle_detail)
        yield SystemCommand("Statistics", "Focus the statistics pane; the arrows scroll its figures (i)",
                            main.action_focus_stats)
        yield SystemCommand("Run history", "The session's runs; mark two and compare them (h)", main.action_history)
        yield SystemCommand("Compare with the baseline", "The run shown beside its autoregressive baseline (c)",
                            main.action_compare_baseline)
        yield SystemCommand("Help", "What every figure, colour and key means (F1, ?)", self.action_help)

    # -- leaving ---------------------------------------------------------------------------------
    def _leave_now(self, code: int, line: str) -> None:
        """SIGTERM or SIGHUP (`tui_decode.state.leaving`): the terminal as it was, ``line`` on
        stderr, and the process ends with ``code``, whatever the app's queue still holds."""
        import threading

        driver = self._driver
        if driver is not None:  # in a thread of its own: a terminal that reads nothing must not hold the exit
            restore = threading.Thread(target=_restore_terminal, args=(driver,), daemon=True)
            restore.start()
            restore.join(0.5)
        try:
            print(line, file=sys.__stderr__, flush=True)
        except (OSError, ValueError, AttributeError):  # the terminal hung up
            pass
        os._exit(code)

    def loader_busy(self) -> bool:
        main = self._main_screen
        return main is not None and (main.loader_busy() or main.decode_busy())


def _restore_terminal(driver: Any) -> None:
    """As the app's own exit does, from a thread (Textual 8.2.8's driver, pinned): mouse reports
    off and the input thread stopped first (`disable_input` does both only in the main thread),
    then the terminal's modes and screen back, every write flushed (`close` waits for them)."""
    try:
        from textual.drivers.linux_driver import LinuxDriver

        if isinstance(driver, LinuxDriver):
            driver._disable_mouse_support()
            driver.exit_event.set()
        driver.stop_application_mode()
        driver.close()
    except Exception:  # noqa: BLE001 - leaving anyway: a terminal that hung up fails every write
        pass


#: `run_app` ends the process itself once the app has run (see there). The test suite, which calls
#: the command line in-process, turns it off (tests/conftest.py): os._exit would end pytest too.
LEAVE_AT_ONCE = True


def run_app(
    spec: FamilySpec | None,
    *,
    prompt: str = DEFAULT_PROMPT,
    settings: Settings | None = None,
    opened: RunResult | None = None,
    opened_name: str = "",
    opened_path: Path | None = None,
    threads: int | None = None,
    suffix_memory: str | None = None,
    suffix_memory_mb: int | None = None,
) -> int:
    """Open the app on ``spec`` (loaded in the background; None: the user picks one), showing
    ``opened`` first if given (a saved run, named ``opened_name``, read from ``opened_path``), with
    torch on ``threads`` CPU threads if given; the exit status. `tui_decode.cli.main.cmd_app` reads
    these from the flags."""
    load = threads_loader(threads) if threads else default_family_loader
    if suffix_memory:  # kept on disk for the first model loaded; the session's runs join it
        start = settings.params if settings is not None else Settings().params
        load = memory_loader(suffix_memory, suffix_memory_mb, start.suffix_depth, load)
    app = TuiDecodeApp(spec, opened=opened, opened_name=opened_name, opened_path=opened_path, settings=settings,
                       prompt=prompt, load_family=load if threads or suffix_memory else None)
    app.run()
    code = app.return_code or 0  # a crash inside the app exits 1, never 0
    if app.crash is not None:
        code = report_crash(app.crash, None)  # one line naming the crash report; exit 1
    if LEAVE_AT_ONCE and (app.started or app.loader_busy()):
        # Leave at once. A model load, or a run winding down after ctrl+q, cannot be interrupted
        # (it holds no files open for writing that matter: the GGUF conversion writes to a
        # temporary folder first, saved runs are written atomically before the key returns). And
        # once torch and a model are loaded, the interpreter's own teardown (freeing every module,
        # tensor and thread pool) took 1.5 s with a tiny model and 4.6-7.5 s with the bundled one,
        # the terminal already restored and blank: nothing in it is needed on the way out.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
