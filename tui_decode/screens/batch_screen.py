"""Batch > 1 (b, issue 39): the batch bench (`decoders.bench.batch`) on the loaded family, in a
screen of its own. Its first two fields take the batch sizes (1..64) and the methods the family
can run at batch > 1; enter runs each method beside autoregressive decoding at each batch size, B
sequences together: the prompt shown first, then the project's own prompt sets
(`tui_decode.state.batch_plan`). It shows each sequence's progress in one line (the selected
one's text in full; up and down select), a table of speedup with its spread, throughput and
latency per method and batch size, the plot of speedup against batch size with break-even (1.0x)
marked, and where each method stops paying. The third field, the synthetic grid
(``0.5,0.7,0.9:1..8``), runs the synthetic draft's cells at each batch size too
(`decoders.bench.batch_synthetic`; the methods field may then be empty): a measuring instrument,
never among the rows, drawn below them against both predictions per α
(`tui_decode.widgets.synthetic_plot`).

The run takes the main screen's engine lock (one run at a time on an engine) in a thread worker;
each sequence's progress is handed over between two timed forwards and drawn before the next one
starts (`DrawGate`), its time off the run's clock (`decode_batch`'s ``on_step``). Escape cancels
at the next iteration (the rows measured so far stay), then closes; ctrl+s saves the table as
Markdown and CSV in the runs folder, as the sweep does (the synthetic cells in a CSV of their own).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static
from textual.worker import Worker, WorkerState, get_current_worker

from decoders.core.errors import DecodeError
from tui_decode.state.batch_plan import (
    GRID_HINT,
    ROUNDS,
    family_methods,
    length_param,
    parse_methods,
    parse_sizes,
    parse_synthetic,
    progress_line,
    prompt_ids,
    report_markdown,
    save_batch,
    start_methods,
    suffix_shape,
    variants,
)
from tui_decode.state.batching import BATCH_INTERVAL
from tui_decode.widgets.batch_views import batch_plot, batch_table
from tui_decode.widgets.gamma_plot import GammaPlot
from tui_decode.widgets.synthetic_plot import SyntheticPlot
from tui_decode.workers.batch_messages import Ended, Progress, RowMeasured, Stepped
from tui_decode.workers.draw_gate import DrawGate
from tui_decode.workers.messages import failure_message

if TYPE_CHECKING:
    import threading

    from decoders.bench.batch import BatchReport, BatchRow
    from decoders.bench.batch_synthetic import SyntheticBatchRow
    from decoders.bench.settings import SyntheticGrid
    from tui_decode.screens.main import MainScreen
    from tui_decode.state.loaded_family import LoadedFamily
    from tui_decode.state.settings import Settings

#: Sequences listed one a line at a time (a window around the selected one).
SHOWN_SEQUENCES = 8


class Stopped(Exception):
    """The worker's own stop: escape asked for it at the last hand-over."""


class BatchScreen(ModalScreen[None]):
    """The batch sizes and methods, each sequence's progress, the table, the plot."""

    DEFAULT_CSS = """
    BatchScreen {
        align: center middle;
        & > #batch-box {
            width: 95%;
            height: 95%;
            border: round $border;
            border-title-color: $text-accent;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        .batch-fields { height: 3; }
        .batch-fields Label { padding: 1 1 0 0; }
        #batch-sizes { width: 24; }
        #batch-methods { width: 24; }
        #batch-grid { width: 1fr; max-width: 72; }
        #batch-error { height: auto; color: $text-error; }
        #batch-body { height: 1fr; }
        #batch-top { height: auto; }
        #batch-left { width: 1fr; height: auto; }
        #batch-seqs { height: auto; }
        #batch-text { height: auto; max-height: 5; overflow-y: auto; color: $text-muted; }
        #batch-plot { width: 1fr; height: 14; }
        #batch-table { height: auto; margin-top: 1; }
        #batch-crossover { height: auto; }
        #batch-status { height: auto; color: $text-muted; }
        &.-narrow #batch-top { layout: vertical; }
        &.-narrow #batch-plot { width: 100%; height: 12; }
    }
    """
    #: Below this many columns the plot goes under the sequences, not beside them.
    WIDE = 120
    BINDINGS = [
        Binding("escape", "stop", "Cancel / close"),
        Binding("ctrl+r", "refuse_run", show=False, priority=True),  # the main screen's run waits
        Binding("ctrl+s", "save", "Save table", priority=True),  # not the main screen's save beneath
        Binding("up", "select(-1)", "Sequence ↑", show=False),
        Binding("down", "select(1)", "Sequence ↓", show=False),
        Binding("pageup", "scroll_body(-1)", "Scroll", show=False),  # a short terminal: the table below
        Binding("pagedown", "scroll_body(1)", "Scroll", show=False),
    ]

    def __init__(self, host: MainScreen, loaded: LoadedFamily, prompt: str, settings: Settings) -> None:
        super().__init__()
        self.host, self.loaded, self.prompt, self.settings = host, loaded, prompt, settings
        self.engine_lock: threading.Lock = host._decode_lock  # one run at a time on the engine
        self.offered = family_methods(settings, loaded.engine.family.backend, loaded.engine.has_helper)
        self.rows: list[BatchRow] = []
        self.synthetic: list[SyntheticBatchRow] = []  # the grid's cells, never among the rows
        self.report: BatchReport | None = None
        self.running = False
        self.cancelled = False
        self.error: str | None = None
        self.selected = 0
        self.stepped: Stepped | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="batch-box") as box:
            box.border_title = f"Batch: speedup against batch size · {self.loaded.label}"
            box.border_subtitle = "enter runs · ↑↓ sequence · pgup/pgdn scroll · escape cancels/closes · ctrl+s saves"
            with Horizontal(id="batch-fields", classes="batch-fields"):
                yield Label("batch sizes")
                yield Input("1,2,4", id="batch-sizes", max_length=40)
                yield Label("methods")
                yield Input(start_methods(self.settings.params.method, self.offered), id="batch-methods",
                            max_length=40)
            with Horizontal(id="batch-fields-grid", classes="batch-fields"):
                yield Label("synthetic grid")
                yield Input("", placeholder=GRID_HINT, id="batch-grid", max_length=60)
            yield Static(id="batch-error")
            with VerticalScroll(id="batch-body", can_focus=False):
                with Horizontal(id="batch-top"):
                    with Vertical(id="batch-left"):
                        yield Static(id="batch-seqs")
                        yield Static(id="batch-text")
                    yield GammaPlot(id="batch-plot")
                yield Static(id="batch-table")
                yield Static(id="batch-crossover")
                yield SyntheticPlot(id="batch-synthetic")
            yield Static(id="batch-status")

    def on_resize(self) -> None:
        self.set_class(self.app.size.width < self.WIDE, "-narrow")

    def on_mount(self) -> None:
        self.on_resize()
        can = [m for m, why in self.offered.items() if why is None]
        self.status(f"enter runs {ROUNDS} rounds per batch size, each method beside autoregressive decoding; "
                    f"this family runs {', '.join(can)} at batch > 1; a synthetic grid measures Theorem 3.8 too")
        self.query_one("#batch-sizes", Input).focus()

    def on_unmount(self) -> None:
        if self.running:
            self.host.restore_threads()

    def status(self, text: str) -> None:
        self.query_one("#batch-status", Static).update(text)

    def action_refuse_run(self) -> None:
        self.notify("A batch run is going; escape cancels it." if self.running
                    else "Close the batch screen first (escape), then ctrl+r runs.", severity="warning")

    # -- starting ---------------------------------------------------------------------------------
    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.running:
            return
        error_line = self.query_one("#batch-error", Static)
        try:
            sizes = parse_sizes(self.query_one("#batch-sizes", Input).value)
            grid = parse_synthetic(self.query_one("#batch-grid", Input).value)
            methods = parse_methods(self.query_one("#batch-methods", Input).value, self.offered, grid is not None)
        except DecodeError as error:
            error_line.update(str(error))  # the fields keep what was typed
            return
        error_line.update("")
        self.rows, self.report, self.error, self.cancelled, self.stepped = [], None, None, False, None
        self.synthetic = []
        self.query_one("#batch-plot", GammaPlot).display = bool(methods)  # a grid alone: no method to plot
        self.show_rows()
        for field in self.query(Input):
            field.disabled = True
        self.running = True
        self.host.hurry_threads()  # as for a run: the UI thread must not slow the timed forwards
        self.host.running = True  # the main screen's run, open and family keys wait
        self.status(f"batch sizes {', '.join(map(str, sizes))}: starting …")
        self.run_batch(sizes, methods, grid)

    @work(thread=True, exclusive=True, group="batch", exit_on_error=False)
    def run_batch(self, sizes: list[int], methods: list[str], grid: SyntheticGrid | None = None) -> None:
        from decoders.bench.batch import check_batches, run_batch_bench
        from decoders.core.host_memory import host_available_memory

        worker = get_current_worker()
        # each message waits until it is drawn, between two timed forwards (no UI work on a timed clock)
        gate = DrawGate(self, lambda: worker.is_cancelled)
        last = [0.0]
        runs: dict[tuple[str, int], list[int]] = {}  # per row and batch size: the records' ids, a run each

        def check() -> None:
            if worker.is_cancelled:
                raise Stopped

        def progress(text: str) -> None:
            check()
            gate.post(Progress(text))

        def on_step(method: str, batch: int, rows) -> None:
            check()
            done = [None if r.finish != "eos" and len(r.out) < max_new else r.finish for r in rows]
            if time.monotonic() - last[0] < BATCH_INTERVAL and not all(d is not None for d in done):
                return
            seen = runs.setdefault((method, batch), [])
            if id(rows) not in seen:  # each run (round) decodes into a list of its own
                seen.append(id(rows))
            gate.post(Stepped(method, batch, len(seen), [list(r.out) for r in rows], done))
            last[0] = time.monotonic()

        def on_row(row: BatchRow | SyntheticBatchRow) -> None:
            gate.post(RowMeasured(row))

        params = self.settings.params
        max_new = int(params.max_new_tokens)
        rows_of = variants(methods, params)
        k = max([int(dict(v.overrides)[length_param(v.method)]) for v in rows_of] + (grid.gammas if grid else []))
        report = None
        try:
            with self.engine_lock:
                family = self.loaded.engine_for(self.settings).family
                room = family.context_length - max_new - k - 2
                ids = prompt_ids(family, self.prompt, bool(params.chat_template), max(sizes) * ROUNDS, room)
                check_batches(family, sizes, max(len(i) for i in ids), max_new, k + 1, host_available_memory(),
                              spec="spec" in methods)
                gate.holding = True  # the UI's loop held from each hand-over to the next
                shape = suffix_shape(family, params, ids) if "suffix" in methods else None
                report = run_batch_bench(family, ids, sizes, methods, max_new, rounds=ROUNDS, k=k,
                                         progress=progress, variants=rows_of, on_step=on_step,
                                         on_row=on_row, suffix=shape, synthetic=grid, on_cell=on_row)
        except Stopped:
            pass
        except DecodeError as error:
            self.post_message(Ended(str(error)))
            return
        except Exception as error:  # noqa: BLE001 - out of memory and bugs alike: report, keep running
            self.post_message(Ended(failure_message(error)))
            return
        finally:
            gate.holding = False
            gate.release()
        self.post_message(Ended(report=report))

    # -- showing ----------------------------------------------------------------------------------
    @on(Progress)
    def progress(self, event: Progress) -> None:
        if self.running and not self.cancelled:
            wait = " (escape stops after it)" if "T(B, k)" in event.text else ""
            self.status(f"{len(self.rows)} rows measured; {event.text} …{wait}")

    @on(Stepped)
    def step(self, event: Stepped) -> None:
        self.stepped = event
        self.show_sequences()

    def show_sequences(self) -> None:
        event = self.stepped
        if event is None:
            return
        count = len(event.outs)
        self.selected = min(self.selected, count - 1)
        start = max(0, min(self.selected - SHOWN_SEQUENCES // 2, count - SHOWN_SEQUENCES))
        shown = range(start, min(count, start + SHOWN_SEQUENCES))
        max_new = int(self.settings.params.max_new_tokens)
        first = " (seq 1: the prompt shown)" if event.round == 1 else " (the project's prompts)"
        lines = [f"{event.method} at B={event.batch}, round {event.round}/{ROUNDS}, {count} sequences{first}"]
        lines += [progress_line(i, len(event.outs[i]), max_new, event.done[i], i == self.selected) for i in shown]
        if count > len(shown):
            lines.append(f"  … {count - len(shown)} more (↑↓)")
        self.query_one("#batch-seqs", Static).update(Text("\n".join(lines)))
        text = self.loaded.engine.family.decode(event.outs[self.selected])
        self.query_one("#batch-text", Static).update(Text(f"seq {self.selected + 1}: {text}"))

    def action_select(self, direction: int) -> None:
        if self.stepped is not None:
            self.selected = max(0, min(self.selected + direction, len(self.stepped.outs) - 1))
            self.show_sequences()

    def action_scroll_body(self, direction: int) -> None:
        body = self.query_one("#batch-body", VerticalScroll)
        (body.scroll_page_down if direction > 0 else body.scroll_page_up)()

    @on(RowMeasured)
    def row_measured(self, event: RowMeasured) -> None:
        from decoders.bench.batch_synthetic import SyntheticBatchRow

        if isinstance(event.row, SyntheticBatchRow):  # a measuring instrument: never among the rows
            self.synthetic.append(event.row)
        else:
            self.rows.append(event.row)
        self.show_rows()

    def show_rows(self) -> None:
        from decoders.bench.batch import crossover

        self.query_one("#batch-plot", GammaPlot).plot(batch_plot(self.rows) if self.rows else None)
        self.query_one("#batch-table", Static).update(batch_table(self.rows))
        methods = dict.fromkeys(r.method for r in self.rows if r.method != "ar")
        words = [f"{m}: {crossover([r for r in self.rows if r.method == m])}" for m in methods]
        self.query_one("#batch-crossover", Static).update("\n".join(words))
        self.query_one("#batch-synthetic", SyntheticPlot).plot(self.synthetic)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that failed outside its own handling must not leave the run going forever."""
        if event.worker.group == "batch" and event.state == WorkerState.ERROR:
            error = event.worker.error
            self.ended(Ended(failure_message(error) if error is not None else None))

    @on(Ended)
    def ended(self, event: Ended) -> None:
        if not self.running:
            return
        self.running = False
        self.host.running = False
        self.host.restore_threads()
        for field in self.query(Input):
            field.disabled = False
        self.error, self.report = event.error, event.report
        done = f"{len(self.rows)} rows measured" + (f", {len(self.synthetic)} synthetic cells (drawn below: pgdn)"
                                                   if self.synthetic else "")
        if event.error:
            self.status(f"stopped: {event.error} ({done}); escape closes")
            self.notify(event.error, title="Batch", severity="error", timeout=10)
        elif self.cancelled or event.report is None:
            self.status(f"cancelled: {done}; the rows so far stay; enter runs again, escape closes")
        else:
            self.status(f"done: {done} in {event.report.elapsed_s:.0f} s; enter runs again, escape closes")

    def action_stop(self) -> None:
        if self.running:
            self.cancelled = True
            self.workers.cancel_group(self, "batch")
            self.status("cancelling at the next iteration …")
        else:
            self.dismiss(None)

    # -- saving -----------------------------------------------------------------------------------
    def action_save(self) -> None:
        """ctrl+s: the report so far as Markdown and its rows as CSV (the synthetic cells in a CSV of
        their own) in the runs folder."""
        if not self.rows and not self.synthetic:
            self.notify("Nothing measured yet to save.", title="Batch", severity="warning")
            return
        folder = self.host.runs_folder
        try:
            names = save_batch(folder, self.markdown(), self.rows, self.synthetic)
        except (OSError, DecodeError) as error:
            self.notify(str(error), title="Batch table not saved", severity="error", timeout=10)
            return
        self.notify(f"Saved {' and '.join(names)} in {folder}", title="Batch")

    def markdown(self) -> str:
        """The bench's report of the run (`decoders.bench.batch_report`), or of the rows so far."""
        return report_markdown(self.report, self.rows, self.loaded.engine.family.describe(),
                               int(self.settings.params.max_new_tokens), self.prompt, self.synthetic)
