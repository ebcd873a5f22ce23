"""The s, r, n and b keys of the main screen: a sweep of the method's draft length, the current
settings run `REPEATS` times and pooled, this machine's noise calibrated (`tui_decode.screens.sweep`),
or the methods at batch > 1 (`tui_decode.screens.batch_screen`), each on the prompt shown in a
screen of its own; or one line saying why not now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tui_decode.screens.batch_screen import BatchScreen
from tui_decode.screens.sweep import (
    CALIBRATION_RUNS,
    REPEATS,
    CalibrateScreen,
    RepeatScreen,
    SweepScreen,
    sweep_values,
)
from tui_decode.state.settings import draft_error, input_error

if TYPE_CHECKING:
    from tui_decode.screens.main import MainScreen
    from tui_decode.state.loaded_family import LoadedFamily


def _idle_with_model(main: MainScreen, then: str) -> LoadedFamily | None:
    """The loaded family where nothing runs or loads; else None and a warning saying which
    (``then``: what to do once a model is loaded)."""
    if main.running or main.loading_family:
        main.notify("Wait for the current run or load to end (escape cancels a run).", severity="warning")
        return None
    if main.loaded is None:
        main.notify(f"No model is loaded yet; {then}.", severity="warning")
    return main.loaded


def start_sweep(main: MainScreen) -> None:
    """The s key: sweep the chosen method's draft length on the prompt shown, or say why not."""
    from decoders.bench.sweep import axis_name
    from decoders.core.params import all_param_specs

    settings, prompt = main.settings, main.prompt_pane.text
    key = main.settings.params.method_def.draft_length
    if key is None:
        main.notify("Autoregressive decoding drafts nothing to sweep; pick another method (m).", severity="warning")
        return
    loaded = _idle_with_model(main, "ctrl+r loads it and runs, then s sweeps")
    if loaded is None:
        return
    error = input_error(prompt, settings) or draft_error(settings, loaded.draft_options(), loaded.label)
    if error is not None:
        main.report_error(error)
        return
    spec = all_param_specs()[key]
    values = sweep_values(spec, getattr(settings.params, key))
    main.app.push_screen(SweepScreen(main, loaded, prompt, settings, key, values, axis_name(key)))


def start_repeat(main: MainScreen) -> None:
    """The r key: the current settings, `REPEATS` times, pooled; or say why not."""
    loaded = _idle_with_model(main, "ctrl+r loads it and runs, then r repeats")
    if loaded is None:
        return
    settings, prompt = main.settings, main.prompt_pane.text
    error = input_error(prompt, settings) or draft_error(settings, loaded.draft_options(), loaded.label)
    if error is not None:
        main.report_error(error)
        return
    main.app.push_screen(RepeatScreen(main, loaded, prompt, settings, "run", list(range(1, REPEATS + 1)), "run"))


def start_calibration(main: MainScreen) -> None:
    """The n key: calibrate this machine's run-to-run noise, or say why not."""
    loaded = _idle_with_model(main, "once it is, n calibrates")
    if loaded is None:
        return
    prompt = main.prompt_pane.text
    error = input_error(prompt, main.settings)
    if error is not None:
        main.report_error(error)
        return
    main.app.push_screen(CalibrateScreen(main, loaded, prompt, main.settings, "run",
                                         list(range(1, CALIBRATION_RUNS + 1)), "run"))


def start_batch(main: MainScreen) -> None:
    """The b key: the batch screen, where enter runs the methods at the batch sizes typed; or say why not."""
    loaded = _idle_with_model(main, "ctrl+r loads it and runs, then b opens the batch screen")
    if loaded is None:
        return
    prompt = main.prompt_pane.text
    error = input_error(prompt, main.settings)
    if error is not None:
        main.report_error(error)
        return
    main.app.push_screen(BatchScreen(main, loaded, prompt, main.settings))
