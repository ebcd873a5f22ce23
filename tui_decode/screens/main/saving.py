"""ctrl+s saves the run shown, as JSON and as an SVG screenshot of the screen showing that very
run; ctrl+o picks a saved run and shows it. A mixin for the main screen (`RunFiles`).

The screenshot is of the live screen, so it must show what the JSON holds: while a run streams
the screen shows the new run but the last result is the old one, so saving waits for the run to
end; and the prompt and parameters panes hold the *next* run's (edited after the run), so for
the screenshot they show the saved run's own for one frame, then the user's come back.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.records import atomic
from decoders.records.run import RunResult
from tui_decode.screens.pickers import OPEN_ANYWAY, replace_edits_picker, run_picker
from tui_decode.state.runs_folder import run_file_stem, saved_runs, write_new

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel

    from tui_decode.state.run_history import RunHistory
    from tui_decode.state.settings import Settings
    from tui_decode.widgets import PromptPane, StatusLine


@runtime_checkable
class RunFilesHost(Protocol):
    """What saving and opening runs need from the main screen."""

    result: RunResult | None  # the run shown
    running: bool
    settings: Settings
    initial_prompt: str
    start_settings: Settings  # the settings the app started with
    runs_folder: Path
    history: RunHistory
    prompt_pane: PromptPane
    status: StatusLine

    @property
    def app(self) -> App[Any]: ...
    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...
    def call_after_refresh(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> bool: ...
    def apply_settings(self, settings: Settings) -> None: ...
    def report_error(self, message: str) -> None: ...
    def show_result(self, result: RunResult, opened_name: str = "", streamed: bool = False) -> None: ...
    def open_path(self, path: Path) -> None: ...


class RunFiles:
    """ctrl+s saves the run shown; ctrl+o picks a saved run and shows it."""

    result: RunResult | None  # the host's (`RunFilesHost`): declared so that assigning it here does not narrow it

    def action_save(self: RunFilesHost) -> None:
        save_shown_run(self)  # the screenshot of the very run the JSON holds

    def action_open_run(self: RunFilesHost) -> None:
        if self.running:
            self.notify("Wait for the run to end (escape cancels it).", severity="warning")
            return
        runs = saved_runs(self.runs_folder)
        if not runs:
            self.notify(f"No saved runs in {self.runs_folder} yet; ctrl+s saves the run shown.",
                        severity="warning")
            return

        def picked(path: str | None) -> None:
            if path is None:
                return
            if not inputs_edited(self):
                self.open_path(Path(path))
                return

            def answered(choice: str | None) -> None:
                if choice == OPEN_ANYWAY:
                    self.open_path(Path(path))

            self.app.push_screen(replace_edits_picker(Path(path).name), answered)

        self.app.push_screen(run_picker(runs, self.runs_folder), picked)

    def open_path(self: RunFilesHost, path: Path) -> None:
        try:
            result = RunResult.load(path)
        except DecodeError as error:
            self.report_error(str(error))
            return
        previous, prompt, settings = self.result, self.prompt_pane.text, self.settings
        try:
            self.show_result(result, opened_name=path.name)
        except DecodeError as error:  # the session keeps what it showed: its run, prompt and parameters
            self.prompt_pane.text = prompt
            self.apply_settings(settings)
            if previous is not None:
                self.show_result(previous)
            else:
                self.result = None
            self.report_error(f"cannot show {path.name}: {error}")
            return
        self.history.record(result, "opened", path)
        self.status.set(f"opened {path.name}", "done")


def inputs_edited(screen: RunFilesHost) -> bool:
    """Whether the prompt or the parameters were edited since the run shown (or since the start,
    with no run shown): opening a saved run would replace them, so ctrl+o asks first."""
    prompt, settings = screen.prompt_pane.text, screen.settings
    if screen.result is None:
        return prompt != screen.initial_prompt or settings != screen.start_settings
    return prompt != screen.result.prompt or settings != run_settings(screen, screen.result)


def run_settings(screen: RunFilesHost, result: RunResult) -> Settings:
    """The settings the panes show for ``result``: its parameters, the rest as they are now."""
    params = DecodeParams.from_json(result.params) if result.params else screen.settings.params
    return screen.settings.replace(params=params)


def save_shown_run(screen: RunFilesHost) -> None:
    """Save the run the screen shows; the screenshot is taken once the panes show that run."""
    result = screen.result
    if result is None:
        screen.notify("Nothing to save yet: run a method first (ctrl+r).", severity="warning")
        return
    if screen.app.screen is not screen:
        screen.notify("Close this screen first (escape): the screenshot saved with the run is of the main "
                      "screen.", severity="warning")
        return
    if screen.running:
        screen.notify("A run is going and the screen shows it, not a finished run: save once it ends "
                      "(escape cancels it; the partial run can be saved).", severity="warning")
        return
    prompt, settings = screen.prompt_pane.text, screen.settings
    shown = run_settings(screen, result)
    if prompt == result.prompt and shown == settings:
        _write(screen, result, screen.app.export_screenshot())
        return
    editor = screen.prompt_pane.editor
    selection = editor.selection
    screen.prompt_pane.text = result.prompt
    screen.apply_settings(shown)

    def take() -> None:
        svg = screen.app.export_screenshot()
        screen.prompt_pane.text = prompt  # the user's own prompt and parameters come back
        editor.selection = selection
        screen.apply_settings(settings)
        _write(screen, result, svg)

    screen.call_after_refresh(take)


def _write(screen: RunFilesHost, result: RunResult, svg: str) -> None:
    """The run and its screenshot, written under the runs folder's lock (one writer at a time:
    another session's save is told, never half-paired); the screenshot is named by the run's stem."""
    from decoders.records.folder import FolderBusy, FolderLock

    lock = FolderLock(screen.runs_folder, "the runs folder", wait_hint="press ctrl+s again in a moment")
    try:
        lock.acquire()
    except FolderBusy as error:
        screen.report_error(f"not saved: {error}")
        return
    except (OSError, DecodeError):  # a folder that cannot be made or written: the save below says so
        pass
    try:
        _write_pair(screen, result, svg)
    finally:
        lock.release()


def _write_pair(screen: RunFilesHost, result: RunResult, svg: str) -> None:
    """The run's JSON (once per run: after a screenshot that failed, ctrl+s again writes the
    screenshot beside the JSON already saved, not a second copy of the run) and its screenshot."""
    folder = screen.runs_folder
    saved = screen.history.saved_file(result)
    if saved is None or saved.parent != folder:
        try:
            stem = run_file_stem(result, folder)
            saved = write_new(folder, stem, ".json", lambda path: result.save(path, exclusive=True))
        except (OSError, DecodeError) as error:
            fix = _fix(error, "set TUI_DECODE_RUNS_DIR to a writable folder")
            screen.report_error(f"cannot save in {folder}: {_reason(error)}; {fix}")
            return
        screen.history.mark_saved(result, saved)
    stem = saved.stem
    try:  # the screenshot's text as UTF-8, a character no file can hold as U+FFFD
        atomic.write_bytes(folder / f"{stem}.svg", svg.encode("utf-8", "replace"), "screenshot")
    except (OSError, DecodeError) as error:
        screen.report_error(f"saved {stem}.json in {folder}, but not its screenshot {stem}.svg: {_reason(error)}; "
                            f"{_fix(error, 'free some disk space')} and press ctrl+s again for the screenshot")
        screen.status.set(f"saved {stem}.json in {folder} (no screenshot)", "done")
        return
    screen.status.set(f"saved {stem}.json and {stem}.svg in {folder}", "done")
    screen.notify(f"{stem}.json + .svg in {folder}", title="Saved")


def _reason(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


def _fix(error: Exception, otherwise: str) -> str:
    """What to do about ``error``: ``otherwise``, unless it is a limit no free space or other folder lifts."""
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return ("the file-size limit of this process (ulimit -f) is smaller than the file: raise it "
                "(ulimit -f unlimited)")
    return otherwise
