"""Saving the run shown (JSON and an SVG screenshot) and opening a saved one: a mixin for the main
screen, which provides the run shown (`result`), the runs folder and the status line."""

from __future__ import annotations

from pathlib import Path

from decoders import atomic
from decoders.errors import DecodeError
from decoders.records import RunResult
from tui_decode.runs_folder import run_file_stem, saved_runs
from tui_decode.widgets import run_picker


class RunFiles:
    """ctrl+s saves the run shown; ctrl+o picks a saved run and shows it."""

    def action_save(self) -> None:
        if self.result is None:
            self.notify("Nothing to save yet: run a method first (ctrl+r).", severity="warning")
            return
        folder = self.runs_folder
        stem = run_file_stem(self.result, folder)
        try:
            self.result.save(folder / f"{stem}.json")
            atomic.write_text(folder / f"{stem}.svg", self.app.export_screenshot(), "screenshot")
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

        self.app.push_screen(run_picker(runs, self.runs_folder), picked)

    def open_path(self, path: Path) -> None:
        try:
            result = RunResult.load(path)
        except DecodeError as error:
            self.report_error(str(error))
            return
        self.show_result(result, opened_name=path.name)
        self.status.set(f"opened {path.name}", "done")
