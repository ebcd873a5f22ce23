"""A sweep of the draft length on the current prompt: one key (s) runs the method at up to eight
values of its `draft_length` parameter (speculative decoding's gamma, prompt lookup's k,
Jacobi's block, ...) and plots each measured speedup, with its spread, on the predicted curve.

The sweep runs in a thread worker on its own screen, on the engine the main screen holds, under
the main screen's lock (one run at a time on an engine). Each value runs beside its own
interleaved baseline (`decoders.engine`), so a machine that changes speed during the sweep does
not tilt the curve. A method whose draft policy would narrow the swept length (adaptive) is swept
with the length fixed (its declaration's `swept`), and the title says so. Escape cancels at the
next iteration; the points measured so far stay; ctrl+s saves the table as Markdown and CSV.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.table import Table
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import Worker, WorkerState, get_current_worker

from decoders.analysis.spread_text import value_with_spread
from decoders.analysis.summary import Summary
from decoders.analysis.verdict import headline
from decoders.core.declarations import ParamSpec
from decoders.core.errors import DecodeError
from decoders.core.events import PhaseStarted
from decoders.records.run import RunResult
from tui_decode.state.run_summary import acceptance_text, judged_drafts
from tui_decode.widgets.gamma_plot import GammaPlot, PlotData, Point
from tui_decode.widgets.stats_pane import headline_speed
from tui_decode.workers.decode import warm_once
from tui_decode.workers.draw_gate import DrawGate
from tui_decode.workers.messages import failure_message

if TYPE_CHECKING:
    import threading

    from tui_decode.screens.main import MainScreen
    from tui_decode.state.loaded_family import LoadedFamily
    from tui_decode.state.settings import Settings

MAX_VALUES = 8  # values one sweep runs: about eight method runs on the current prompt
VERDICT_WORD = {"faster": "faster", "slower": "slower", "even": "even", "unknown": "", "withheld": "no verdict"}


def sweep_values(spec: ParamSpec, current: int, limit: int = MAX_VALUES) -> list[int]:
    """Up to ``limit`` consecutive values around ``current`` inside the parameter's range (the
    app's range where it has one), ``current`` first: its run gives the predicted curve."""
    lo, hi = spec.ui_range or (spec.low, spec.high)
    assert lo is not None and hi is not None  # a swept parameter has a range (`sweepable`)
    low, high = int(lo), int(hi)
    current = min(max(int(current), low), high)
    start = max(low, min(current - (limit // 2 - 1), high - limit + 1))
    values = list(range(start, min(high, start + limit - 1) + 1))
    values.remove(current)
    return [current, *values]


@dataclass
class Measured:
    value: int
    summary: Summary
    judged: int | None = None  # drafts the target judged: the acceptance rate's denominator


def sweep_plot(points: list[Measured], current: int, name: str) -> PlotData:
    """The predicted curves of the run at the current value (the first measured), and every
    measured speedup with its spread."""
    first = next((m.summary for m in points if m.value == current), points[0].summary if points else None)
    extras = first.extras if first is not None else {}
    marks = [Point(m.value, speed, m.summary.speedup_spread) for m in points
             if (speed := headline_speed(m.summary)) is not None]
    return PlotData(extras.get("curve") or [], extras.get("cost_curve"), current, marks, name)


class SweepScreen(ModalScreen[None]):
    """The sweep's plot and table; escape cancels a running sweep, then closes."""

    DEFAULT_CSS = """
    SweepScreen {
        align: center middle;
        & > #sweep-box {
            width: 90%;
            height: 90%;
            border: round $border;
            border-title-color: $text-accent;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        #sweep-plot { height: 1fr; min-height: 10; }
        #sweep-table { height: auto; max-height: 12; margin-top: 1; }
        #sweep-status { height: 1; color: $text-muted; }
    }
    """
    BINDINGS = [
        Binding("escape", "stop", "Cancel / close"),
        Binding("ctrl+r", "refuse_run", show=False, priority=True),  # the main screen's run waits for the sweep
        Binding("ctrl+s", "save", "Save table", priority=True),  # not the main screen's save beneath
    ]

    class Progress(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class PointMeasured(Message):
        def __init__(self, measured: Measured) -> None:
            super().__init__()
            self.measured = measured

    class Ended(Message):
        def __init__(self, error: str | None = None) -> None:
            super().__init__()
            self.error = error

    def __init__(self, host: MainScreen, loaded: LoadedFamily, prompt: str, settings: Settings, key: str,
                 values: list[int], name: str) -> None:
        super().__init__()
        self.host, self.loaded, self.prompt, self.settings = host, loaded, prompt, settings
        self.key, self.values, self.axis = key, values, name
        # one run at a time on the engine: the main screen's lock (not `Widget.lock`, Textual's own)
        self.engine_lock: threading.Lock = host._decode_lock
        self.points: list[Measured] = []
        self.running = True
        self.cancelled = False
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-box") as box:
            box.border_title = self.heading_text()
            box.border_subtitle = "escape cancels · escape again closes · ctrl+s saves"
            yield GammaPlot(id="sweep-plot")
            yield Static(id="sweep-table")
            yield Static(id="sweep-status")

    def heading_text(self) -> str:
        fixed = self.settings.params.method_def.swept(self.key).get("draft_policy") == "fixed"
        return (f"Sweep of {self.axis} = {', '.join(map(str, sorted(self.values)))} · "
                f"{self.settings.params.method_def.label}" + (" · draft policy fixed" if fixed else ""))

    def params_for(self, value: int):
        """The parameters of the run at ``value``."""
        return self.settings.params.replace(record=False, **{self.key: value},
                                            **self.settings.params.method_def.swept(self.key))

    def plot_data(self) -> PlotData:
        return sweep_plot(self.points, self.values[0], self.axis)

    def done_text(self) -> str:
        best = max(self.points, key=lambda m: headline_speed(m.summary) or 0.0, default=None)
        return f"; fastest measured {self.axis}={best.value}" if best is not None else ""

    def file_stem(self) -> str:
        return f"sweep-{self.settings.params.method_def.name}-{self.key}"

    def on_mount(self) -> None:
        self.status(f"running {self.axis}={self.values[0]} …")
        self.host.hurry_threads()  # as for a run: the UI thread must not slow the timed runs
        self.host.running = True  # the main screen's run, open and family keys wait for the sweep
        self.run_sweep()

    def on_unmount(self) -> None:
        self.host.restore_threads()

    def action_refuse_run(self) -> None:
        """ctrl+r over the sweep: no run while the sweep holds the engine (nor over its plot)."""
        self.notify("A sweep is already going; escape cancels it." if self.running
                    else "Close the sweep first (escape), then ctrl+r runs.", severity="warning")

    def status(self, text: str) -> None:
        self.query_one("#sweep-status", Static).update(text)

    @work(thread=True, exclusive=True, group="sweep", exit_on_error=False)
    def run_sweep(self) -> None:
        worker = get_current_worker()
        # each message waits until it is drawn, between two timed steps (no UI work on a timed clock)
        gate = DrawGate(self, lambda: worker.is_cancelled)
        try:
            with self.engine_lock:
                engine = self.loaded.engine_for(self.settings)
                for value in self.values:
                    if worker.is_cancelled:
                        break
                    params = self.params_for(value)
                    warm_once(engine, self.prompt, params)
                    result = None
                    for event in engine.stream(self.prompt, params, cancelled=lambda: worker.is_cancelled):
                        if isinstance(event, RunResult):
                            result = event
                        elif isinstance(event, PhaseStarted):
                            what = {"baseline": "running the baseline", "curve": f"{self.axis}={value} done, "
                                    "measuring T(k)"}.get(event.phase, f"running {self.axis}={value}")
                            gate.post(self.Progress(f"{what} …"))
                    if result is None or result.method.finish == "cancelled":
                        break
                    gate.post(self.PointMeasured(Measured(value, result.summary, judged_drafts(result.method))))
        except DecodeError as error:
            self.post_message(self.Ended(str(error)))
            return
        except Exception as error:  # noqa: BLE001 - out of memory and bugs alike: report, keep running
            self.post_message(self.Ended(failure_message(error)))
            return
        self.post_message(self.Ended())

    @on(Progress)
    def progress(self, event: Progress) -> None:
        if self.running and not self.cancelled:
            self.status(f"{len(self.points)}/{len(self.values)} measured; {event.text}")

    @on(PointMeasured)
    def point(self, event: SweepScreen.PointMeasured) -> None:
        self.points.append(event.measured)
        self.query_one("#sweep-plot", GammaPlot).plot(self.plot_data())
        self.query_one("#sweep-table", Static).update(self.table())

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that failed outside its own handling must not leave the sweep running forever
        (escape would never close it). Not on CANCELLED: the thread runs on to its next iteration,
        holding the engine, and says when it stops."""
        if event.worker.group == "sweep" and event.state == WorkerState.ERROR:
            error = event.worker.error
            self.ended(self.Ended(failure_message(error) if error is not None else None))

    @on(Ended)
    def ended(self, event: Ended) -> None:
        if not self.running:
            return
        self.running = False
        self.host.running = False
        self.host.restore_threads()
        self.error = event.error
        done = f"{len(self.points)}/{len(self.values)} measured"
        if event.error:
            self.status(f"stopped: {event.error} ({done}); escape closes")
            self.notify(event.error, title="Sweep", severity="error", timeout=10)
        elif self.cancelled:
            self.status(f"cancelled: {done}; the points so far stay; escape closes")
        else:
            self.status(f"done: {done}{self.done_text()}; escape closes")
        self.finished(event)

    def finished(self, event: Ended) -> None:
        """After the screen has shown how the sweep ended (a subclass's last word)."""

    def table(self) -> Table:
        """Value and speedup first, uncut at 80 columns (the speedup as a number, its spread and a
        one-word verdict; the long sentence is the main screen's); tau, acceptance and identity after."""
        grid = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
        grid.add_column(self.axis, no_wrap=True, min_width=len(self.axis))
        grid.add_column("speedup ± spread", no_wrap=True, min_width=16)
        for column in ("tau", "of judged drafts", "identical"):
            grid.add_column(column, no_wrap=True)
        for m in sorted(self.points, key=lambda m: m.value):
            s = m.summary
            h = headline(s)  # the figure, spread and verdict the main screen gives
            if h.speedup is None:
                words = "–"
            else:
                words = f"{value_with_spread(h.speedup, h.spread, sign='±')} {VERDICT_WORD[h.verdict]}"
            same = "–" if s.identical is None else "yes" if s.identical else f"no @{s.first_divergence}"
            grid.add_row(str(m.value), words, f"{s.tau:.2f}" if s.tau is not None else "–",
                         acceptance_text(s, m.judged, named=False), same)
        return grid

    def action_save(self) -> None:
        """ctrl+s: the table so far as Markdown and CSV in the runs folder (atomic writes)."""
        from decoders.records import atomic
        from tui_decode.state.runs_folder import write_new

        if not self.points:
            self.notify("Nothing measured yet to save.", title="Sweep", severity="warning")
            return
        text, table = self.export()
        folder = self.host.runs_folder
        try:
            folder.mkdir(parents=True, exist_ok=True)
            md = write_new(folder, f"{time.strftime('%Y%m%d-%H%M%S')}-{self.file_stem()}", ".md",  # never over one
                           lambda p: atomic.write_text(p, text, "the sweep table", exclusive=True))
            stem = md.stem
            atomic.write_text(folder / f"{stem}.csv", table, "the sweep table")
        except (OSError, DecodeError) as error:
            self.notify(str(error), title="Sweep not saved", severity="error", timeout=10)
            return
        self.notify(f"Saved {md.name} and {stem}.csv in {folder}", title="Sweep")

    def export(self) -> tuple[str, str]:
        """The saved table as Markdown and as CSV, in the screen's words: its title, the swept
        parameter by the name its table shows (k, not num_pred), the method as the runs ran it."""
        from tui_decode.state.exports import table_csv, table_markdown

        rows = [(m.value, m.summary) for m in sorted(self.points, key=lambda m: m.value)]
        notes = [f"prompt: {self.prompt[:200]!r}", f"family: {self.loaded.engine.family.label}",
                 f"method: {self.method_note()}"]
        return table_markdown(self.heading_text(), self.axis, rows, notes), table_csv(self.axis, rows)

    def method_note(self) -> str:
        """The method as the sweep ran it (its draft policy fixed where the title says so), at
        the first value; the other rows differ in the swept parameter only."""
        first = self.values[0]
        label = self.settings.params.method_def.run_label(self.params_for(first))
        return f"{label} at {self.axis}={first}; each row sets {self.axis} to its value"

    def action_stop(self) -> None:
        if self.running:
            self.cancelled = True
            self.workers.cancel_group(self, "sweep")
            self.status("cancelling at the next iteration …")
        else:
            self.dismiss(None)


class RepeatScreen(SweepScreen):
    """r: the current settings run N times, each beside its own interleaved baseline; each run's
    speedup with its spread (the raw one beside it where paired sequentially), and the pooled
    figure (`decoders.analysis.timing.pool`)."""

    def heading_text(self) -> str:
        return (f"{len(self.values)} runs of {self.settings.params.method_def.run_label(self.settings.params)} "
                "· pooled")

    def params_for(self, value: int):
        return self.settings.params.replace(record=False)

    def plot_data(self) -> PlotData:
        marks = [Point(m.value, speed, m.summary.speedup_spread) for m in self.points
                 if (speed := headline_speed(m.summary)) is not None]
        return PlotData([], None, 1, marks, "run ")

    def done_text(self) -> str:
        from decoders.analysis.timing import pool, ratio_text

        pooled = pool([m.summary for m in self.points])
        return "" if pooled is None else f"; pooled: {ratio_text(pooled.speedup, pooled.spread)}"

    def file_stem(self) -> str:
        return f"repeat-{self.settings.params.method_def.name}"

    def method_note(self) -> str:
        return self.settings.params.method_def.run_label(self.settings.params)


REPEATS = 5  # runs the r key pools


class CalibrateScreen(RepeatScreen):
    """n: this machine's run-to-run noise: autoregressive decoding against its own interleaved
    baseline, `CALIBRATION_RUNS` times (the truth is 1.00x), on the prompt shown. Kept per machine
    and model (`decoders.models.machine`); from then on every spread covers a second run. A
    cancelled or failed calibration leaves the one used before."""

    def heading_text(self) -> str:
        return (f"Calibration: {len(self.values)} runs of autoregressive decoding against itself "
                "(the truth is 1.00x)")

    def params_for(self, value: int):
        engine = self.loaded.engine
        return engine.calibration_params().replace(chat_template=self.settings.params.chat_template)

    def file_stem(self) -> str:
        return "calibration"

    def on_mount(self) -> None:
        self.previous = self.loaded.engine.forget_calibration()  # its own runs are not widened
        super().on_mount()

    def done_text(self) -> str:
        return ""

    def finished(self, event: SweepScreen.Ended) -> None:
        engine = self.loaded.engine
        if event.error or self.cancelled or len(self.points) < len(self.values):
            engine.use_calibration(self.previous)
            return
        try:
            calibration = engine.keep_calibration([m.summary for m in self.points])
        except (ValueError, DecodeError) as error:
            engine.use_calibration(self.previous)
            self.status(f"not kept: {error}; escape closes")
            self.notify(str(error), title="Calibration", severity="error", timeout=10)
            return
        text = (f"run-to-run noise {100 * calibration.noise:.1f}% beyond step jitter, measured "
                f"{calibration.measured[:16].replace('T', ' ')} UTC; every spread now covers a second run")
        self.status(f"done: {text}; escape closes")
        self.notify(text, title="Calibration kept")


CALIBRATION_RUNS = 6
