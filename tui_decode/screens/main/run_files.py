"""Saving the run shown (JSON and an SVG screenshot) and opening a saved one: a mixin for the main
screen, which provides the run shown (`result`), the runs folder and the status line."""

from __future__ import annotations

from pathlib import Path

from decoders.core.errors import DecodeError
from decoders.records.run import RunResult
from tui_decode.screens.main.saving import save_shown_run
from tui_decode.screens.pickers import run_picker
from tui_decode.state.runs_folder import saved_runs


class RunFiles:
    """ctrl+s saves the run shown; ctrl+o picks a saved run and shows it."""

    def action_save(self) -> None:
        save_shown_run(self)  # the screenshot of the very run the JSON holds (see tui_decode.screens.main.saving)

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
        self.history.record(result, "opened", path)
        self.show_result(result, opened_name=path.name)
        self.status.set(f"opened {path.name}", "done")
