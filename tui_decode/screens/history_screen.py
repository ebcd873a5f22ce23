"""Every run of the session (and the newest saved ones) in one table, newest first, each with its
baseline; space marks two, enter shows them side by side.

It opens with the last two runs marked (the last run and its baseline when there is only one),
so h then enter compares them; x exports the table (Markdown and CSV, one row a run).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from tui_decode.screens.compare_screen import CompareScreen
from tui_decode.state.exports import table_csv, table_markdown
from tui_decode.state.run_history import (
    EXPORT_KEY,
    HISTORY_COLUMNS,
    Comparison,
    RunHistory,
    Stream,
    export_rows,
    row_cells,
)

COLUMNS = HISTORY_COLUMNS


class HistoryScreen(ModalScreen[None]):
    """The run history; enter compares the two marked rows."""

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("space", "toggle_mark", "Mark"),
        Binding("enter", "compare", "Compare", priority=True),
        Binding("b", "compare_baseline", "vs baseline"),
        Binding("x", "export", "Export"),
    ]

    def __init__(self, history: RunHistory, note: str = "") -> None:
        super().__init__()
        self.history = history
        self.streams: list[Stream] = history.streams()
        self.marked: list[Stream] = [s for s in history.preselected() if s in self.streams]
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog history"):
            yield Label("Runs · space marks two, enter compares them, b compares a run with its baseline, "
                        "x exports the table", classes="dialog-title")
            self.table: DataTable[str | Text] = DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
            yield self.table
            if self.note:
                yield Label(self.note, classes="dialog-note")

    def on_mount(self) -> None:
        for label in COLUMNS:
            self.table.add_column(label)
        self._fill()
        self.table.focus()

    def _fill(self) -> None:
        row = self.table.cursor_row
        self.table.clear()
        for stream in self.streams:
            number, *rest = row_cells(stream)
            style = "dim" if stream.role == "baseline" else ""
            self.table.add_row(self._mark(stream, number), *(Text(c, style=style) for c in rest))
        if self.table.row_count:
            self.table.move_cursor(row=min(row, self.table.row_count - 1), animate=False)

    def _mark(self, stream: Stream, number: str) -> Text:
        """The row's number, after ●1 / ●2 when it is marked (the left and the right side)."""
        if stream in self.marked:
            return Text.assemble((f"●{self.marked.index(stream) + 1} ", "bold"), number)
        return Text(f"   {number}")

    @property
    def highlighted(self) -> Stream | None:
        row = self.table.cursor_row
        return self.streams[row] if 0 <= row < len(self.streams) else None

    # -- actions ---------------------------------------------------------------------------------
    def action_close(self) -> None:
        self.dismiss(None)

    def action_toggle_mark(self) -> None:
        stream = self.highlighted
        if stream is None:
            return
        if stream in self.marked:
            self.marked.remove(stream)
        else:
            self.marked = [*self.marked[-1:], stream]  # two at most: the older mark goes
        self._fill()

    def action_compare(self) -> None:
        if len(self.marked) == 2:
            self.compare(*self.marked)
            return
        here = self.highlighted
        if here is None:
            return
        if self.marked and self.marked[0] != here:
            self.compare(self.marked[0], here)
        else:
            self.action_compare_baseline()

    def action_compare_baseline(self) -> None:
        here = self.highlighted
        if here is None:
            return
        if here.role == "baseline":
            self.notify("That row is a baseline: mark two rows with space, then press enter.",
                        severity="warning")
            return
        self.compare(Stream(here.entry, "baseline"), here)

    def action_export(self) -> None:
        """x: the history as Markdown and CSV in the runs folder (`tui_decode.state.exports`,
        written atomically), one row a run."""
        from decoders.core.errors import DecodeError
        from decoders.records import atomic

        rows = export_rows(self.history)
        folder = getattr(self.app.screen_stack[0], "runs_folder", None)
        if folder is None or not rows:
            self.notify("No runs folder to export to." if folder is None else "No runs to export yet.",
                        severity="warning")
            return
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-history"
        notes = ["decode speedup: each run against its own autoregressive baseline (pairing says how it was timed)",
                 "from: session (run now), opened (ctrl+o) or saved (a file of the runs folder)"]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            md = atomic.write_text(folder / f"{stem}.md", table_markdown("Run history", EXPORT_KEY, rows, notes),
                                   "the history")
            atomic.write_text(folder / f"{stem}.csv", table_csv(EXPORT_KEY, rows), "the history")
        except (OSError, DecodeError) as error:
            self.notify(str(error), title="Not exported", severity="error", timeout=10)
            return
        self.notify(f"Exported {md.name} and {stem}.csv to {folder}", title="History")

    @on(DataTable.RowSelected)
    def row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_compare()

    def compare(self, left: Stream, right: Stream) -> None:
        self.app.push_screen(CompareScreen(Comparison(left, right)))


def open_history(main) -> None:
    """h on the main screen: the history, the last two runs marked (one keystroke, enter compares)."""
    from tui_decode.screens.main.showing import texts_from_ids

    problems = main.history.load_saved(main.runs_folder, check_texts=lambda result: texts_from_ids(result, main.loaded))
    notes = main.history.text_notes
    if notes:  # token texts that disagreed with the ids: one notice for the folder
        more = f" (and {len(notes) - 1} more file(s))" if len(notes) > 1 else ""
        main.notify(notes[0] + more, title="Token texts", severity="warning", timeout=12)
    if not main.history.entries:
        main.notify("No runs yet: ctrl+r runs the method, ctrl+o opens a saved run.", severity="warning")
        return
    note = ""
    if problems:
        note = f"{len(problems)} saved file(s) could not be read and are left out: {problems[0]}"
    main.app.push_screen(HistoryScreen(main.history, note))


def compare_with_baseline(main) -> None:
    """c on the main screen: the run shown beside its autoregressive baseline."""
    if main.result is None:
        main.notify("No run to compare yet: ctrl+r runs the method, ctrl+o opens a saved run.", severity="warning")
        return
    entry = main.history.record(main.result)
    main.app.push_screen(CompareScreen(Comparison(Stream(entry, "baseline"), Stream(entry, "method"))))
