"""ctrl+s: the run shown, as JSON and as an SVG screenshot of the screen showing that very run.

The screenshot is of the live screen, so it must show what the JSON holds: while a run streams
the screen shows the new run but the last result is the old one, so saving waits for the run to
end; and the prompt and parameters panes hold the *next* run's (edited after the run), so for
the screenshot they show the saved run's own for one frame, then the user's come back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from decoders.core.params import DecodeParams
from decoders.records import atomic
from decoders.records.run import RunResult
from tui_decode.state.runs_folder import run_file_stem

if TYPE_CHECKING:
    from tui_decode.screens.main import MainScreen


def run_settings(screen: MainScreen, result: RunResult):
    """The settings the panes show for ``result``: its parameters, the rest as they are now."""
    params = DecodeParams.from_json(result.params) if result.params else screen.settings.params
    return screen.settings.replace(params=params)


def save_shown_run(screen: MainScreen) -> None:
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
    screen._apply_settings(shown)

    def take() -> None:
        svg = screen.app.export_screenshot()
        screen.prompt_pane.text = prompt  # the user's own prompt and parameters come back
        editor.selection = selection
        screen._apply_settings(settings)
        _write(screen, result, svg)

    screen.call_after_refresh(take)


def _write(screen: MainScreen, result: RunResult, svg: str) -> None:
    folder = screen.runs_folder
    stem = run_file_stem(result, folder)
    try:
        result.save(folder / f"{stem}.json")
        atomic.write_text(folder / f"{stem}.svg", svg, "screenshot")
    except OSError as error:
        screen.report_error(f"cannot save in {folder}: {error.strerror or error}; set TUI_DECODE_RUNS_DIR "
                            "to a writable folder")
        return
    screen.history.mark_saved(result, folder / f"{stem}.json")
    screen.status.set(f"saved {stem}.json and {stem}.svg in {folder}", "done")
    screen.notify(f"{stem}.json + .svg in {folder}", title="Saved")
