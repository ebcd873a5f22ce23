"""One row per iteration: what was drafted, how verification judged it, and what it cost."""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from decoders.records.run import Iteration
from tui_decode.widgets.styles import component_style

BARS = "▁▂▃▄▅▆▇█"
#: Draft positions that get a bar: a tree of 256 rows drew bar columns 256 cells wide (and took
#: 40 ms a row to build); the rest is "…", the detail pane has them all.
BARS_SHOWN = 32
DRAFT_CELL_WIDTH = 8  # the least the drafted tokens get; more when the table is wider
DRAFT_CELL_MAX = 160
CELL_PADDING = 1  # DataTable's, each side of every column
COLUMNS = (
    ("#", "k"),
    ("pos", "pos"),
    ("drafted", "draft"),
    ("q", "q"),
    ("p", "p"),
    ("acc", "acc"),
    ("emit", "emit"),
    ("draft", "t_draft"),  # milliseconds, as the border title says
    ("verify", "t_verify"),
)
#: Each column but the drafted tokens at its header's width: where `IterationTable.widths` starts.
HEADER_WIDTHS = {key: len(label) for label, key in COLUMNS if key != "draft"}


def cell_widths(it: Iteration) -> dict[str, int]:
    """How wide each column but the drafted tokens draws ``it`` (see `IterationTable._row`)."""
    def bars(attr: str) -> int:
        shown = min(len(it.draft), BARS_SHOWN + 1)  # "…" after the first BARS_SHOWN
        return shown if any(getattr(row, attr) is not None for row in it.draft[:BARS_SHOWN]) else 0

    return {"k": len(str(it.k)), "pos": len(str(it.pos)), "q": bars("q"), "p": bars("p"), "acc": bars("acc_prob"),
            "emit": len(str(len(it.emit))), "t_draft": len(f"{it.t_draft_ms:.1f}") if it.draft else 0,
            "t_verify": len(f"{it.t_verify_ms:.1f}")}


def bar(value: float | None) -> str:
    """A probability as one block character (one cell per draft position keeps rows narrow)."""
    if value is None:
        return "·"
    return BARS[min(int(value * len(BARS)), len(BARS) - 1)]


class IterationTable(DataTable):
    """Rows grow as iterations are verified; the highlighted row drives the detail pane.

    q, p and acceptance probability are drawn as one bar per draft position, coloured like the
    draft's status; the detail pane gives their exact values.

    A run of more than `WINDOW` iterations (a saved run of 131072 one-token steps) shows a window
    of them: a DataTable lays out and measures every row it holds (0.5 ms each: a minute for such a
    run, the app frozen). The cursor moving past the window's edge, or an iteration chosen in the
    token stream, moves the window; the title says which iterations it holds. ``selected`` and
    ``count`` are in iterations, ``cursor_row`` and ``row_count`` in the window's rows.
    """

    WINDOW = 1000

    BORDER_TITLE = "Iterations · draft and verify in ms"
    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {
        "iteration-table--acc",
        "iteration-table--rej",
        "iteration-table--unv",
    }
    BINDINGS = [Binding("enter", "select_cursor", "Detail", show=True)]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True, cell_padding=CELL_PADDING)
        self.iterations: list[Iteration] = []
        self.first = 0  # the iteration in the window's first row
        self._building = False
        self.draft_width = DRAFT_CELL_WIDTH
        self.widths = dict(HEADER_WIDTHS)  # the widest cell so far

    @property
    def count(self) -> int:
        """Iterations of the run shown (the rows are a window of them)."""
        return len(self.iterations)

    @property
    def selected(self) -> int:
        """The iteration the cursor is on."""
        return self.first + self.cursor_row

    def _window_rows(self) -> list[Iteration]:
        return self.iterations[self.first:self.first + self.WINDOW]

    def _show_window(self, first: int, selected: int) -> None:
        """Rows for the window of iterations from ``first``, the cursor on iteration ``selected``
        (none before the table has its size: its first resize draws them, at the width it has)."""
        self.first = max(0, min(first, max(self.count - self.WINDOW, 0)))
        self._building = True  # the cursor passes the rows' edges while they are added
        try:
            self._clear_rows()
            self.widths = dict(HEADER_WIDTHS)
            self._widen(self._window_rows())
            self.draft_width = self._fitting_draft_width()
            if self.scrollable_content_region.width:
                self.add_rows([self._row(it) for it in self._window_rows()])
        finally:
            self._building = False
        self._title()
        if self.row_count:
            self.move_cursor(row=min(max(selected - self.first, 0), self.row_count - 1), animate=False, scroll=True)

    def _title(self) -> None:
        if self.count > self.WINDOW:
            last = self.first + self.row_count
            self.border_title = f"Iterations {self.first + 1}-{last} of {self.count} · draft and verify in ms"
        else:
            self.border_title = self.BORDER_TITLE

    def watch_cursor_coordinate(self, old, new) -> None:
        """The cursor at the window's first or last row, with iterations beyond: move the window so
        that the cursor's iteration is in its middle."""
        super().watch_cursor_coordinate(old, new)
        if not self._building and self._at_edge():
            self.call_later(self._recentre)

    def _at_edge(self) -> bool:
        row, rows = self.cursor_row, self.row_count
        return rows > 0 and ((row == rows - 1 and self.first + rows < self.count) or (row == 0 and self.first > 0))

    def _recentre(self) -> None:
        if self._at_edge():  # still there (not moved back inside meanwhile)
            self._show_window(self.selected - self.WINDOW // 2, self.selected)

    def _fitting_draft_width(self) -> int:
        """The drafted tokens get the width the other columns leave, so that the table fits its pane
        (at 120 columns as at 200); the vertical scrollbar is counted whether shown yet or not."""
        scrollbar = 0 if self.show_vertical_scrollbar else self.styles.scrollbar_size_vertical
        room = self.scrollable_content_region.width - scrollbar
        others = sum(self.widths.values()) + 2 * CELL_PADDING * len(COLUMNS)
        return min(max(DRAFT_CELL_WIDTH, room - others), DRAFT_CELL_MAX)

    def _widen(self, iterations: Sequence[Iteration]) -> None:
        for it in iterations:
            for key, width in cell_widths(it).items():
                if width > self.widths[key]:
                    self.widths[key] = width

    def _fit(self, iterations: Sequence[Iteration] = ()) -> bool:
        """Widen the other columns for ``iterations`` (those in the window); re-draw the window's
        rows when the drafted tokens' width changes (a resize, the first longer draft). True when
        it re-drew."""
        self._widen(iterations)
        width = self._fitting_draft_width()
        if width == self.draft_width:
            return False
        self.draft_width = width
        if self.row_count:
            self._show_window(self.first, self.selected)
            return True
        return False

    def on_resize(self) -> None:
        if self.count and not self.row_count:  # shown before the table had its size
            self._show_window(self.first, self.first)
        else:
            self._fit()

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key)

    def clear_iterations(self) -> None:
        self.iterations = []
        self.first = 0
        self.widths = dict(HEADER_WIDTHS)
        self._clear_rows()
        self._title()

    def _clear_rows(self) -> None:
        """No rows, and columns as narrow as their headers (DataTable keeps the widest cell it met:
        a run of long drafts would leave the next run's table too wide)."""
        self.clear()
        for column in self.columns.values():
            column.content_width = column.label.cell_len

    def show_iterations(self, iterations: list[Iteration]) -> None:
        """A whole run at once: the cursor starts on the first iteration."""
        self.clear_iterations()
        self.iterations.extend(iterations)
        self._show_window(0, 0)

    def add_iterations(self, iterations: list[Iteration]) -> None:
        """Append rows (a live run), up to the window's end. The cursor stays where it is: following
        the newest row would redraw the detail pane with every batch, drawing time the running
        decode would pay for. A few times a run (a longer draft, a tenth iteration) the rows are
        re-drawn to fit."""
        shown_to = self.first + self.row_count
        self.iterations.extend(iterations)
        if not self._fit(self.iterations[shown_to:self.first + self.WINDOW]):
            end = min(self.first + self.WINDOW, self.count)
            self.add_rows([self._row(it) for it in self.iterations[shown_to:end]])
        self._title()

    def select_last(self) -> None:
        self.select_iteration(self.count - 1)

    def select_iteration(self, k: int) -> None:
        """Put the cursor on iteration ``k``, moving the window to it if it is outside."""
        if not 0 <= k < self.count or (k == self.selected and self.row_count):
            return
        if not self.first <= k < self.first + self.row_count:
            self._show_window(k - self.WINDOW // 2, k)
        else:
            self.move_cursor(row=k - self.first, animate=False, scroll=True)

    def action_scroll_top(self) -> None:
        """ctrl+home: the run's first iteration (not the window's)."""
        self.select_iteration(0)

    def action_scroll_bottom(self) -> None:
        """ctrl+end: the run's last iteration."""
        self.select_last()

    def _status_styles(self) -> dict[str, Style]:
        return {s: component_style(self, f"iteration-table--{s}") for s in ("acc", "rej", "unv")}

    def _row(self, it: Iteration) -> list:
        styles = self._status_styles()
        draft = Text(no_wrap=True, overflow="ellipsis")
        for n, row in enumerate(it.draft):
            if n:
                draft.append("│", style="dim")
            draft.append(row.text, style=styles.get(row.status))
            if len(draft) > self.draft_width:  # the rest is cut anyway
                break
        draft.truncate(self.draft_width, overflow="ellipsis")

        def bars(attr: str) -> Text:
            """One bar per draft position; nothing when the method has no such value (no helper: no q)."""
            rows = it.draft[:BARS_SHOWN]
            values = [getattr(row, attr) for row in rows]
            if all(v is None for v in values):
                return Text("")
            cells = Text.assemble(*[(bar(v), styles.get(row.status, "")) for v, row in zip(values, rows, strict=False)])
            return cells.append("…", style="dim") if len(it.draft) > BARS_SHOWN else cells

        return [
            Text(str(it.k), justify="right"),
            Text(str(it.pos), justify="right"),
            draft if it.draft else Text("—", style="dim"),
            bars("q"),
            bars("p"),
            bars("acc_prob"),
            Text(str(len(it.emit)), justify="right"),
            Text(f"{it.t_draft_ms:.1f}" if it.draft else "", justify="right"),
            Text(f"{it.t_verify_ms:.1f}", justify="right"),
        ]
