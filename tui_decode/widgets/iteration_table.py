"""One row per iteration: what was drafted, how verification judged it, and what it cost."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from decoders.records.run import Iteration
from tui_decode.widgets.styles import component_style

BARS = "▁▂▃▄▅▆▇█"
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
        return len(it.draft) if any(getattr(row, attr) is not None for row in it.draft) else 0

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
    """

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
        self.draft_width = DRAFT_CELL_WIDTH
        self.widths = dict(HEADER_WIDTHS)  # the widest cell so far

    def _fitting_draft_width(self) -> int:
        """The drafted tokens get the width the other columns leave, so that the table fits its pane
        (at 120 columns as at 200); the vertical scrollbar is counted whether shown yet or not."""
        scrollbar = 0 if self.show_vertical_scrollbar else self.styles.scrollbar_size_vertical
        room = self.scrollable_content_region.width - scrollbar
        others = sum(self.widths.values()) + 2 * CELL_PADDING * len(COLUMNS)
        return min(max(DRAFT_CELL_WIDTH, room - others), DRAFT_CELL_MAX)

    def _fit(self, iterations: list[Iteration] = ()) -> bool:
        """Widen the other columns for ``iterations``; re-draw the rows drawn so far when the
        drafted tokens' width changes (a resize, the first longer draft). True when it re-drew."""
        for it in iterations:
            for key, width in cell_widths(it).items():
                if width > self.widths[key]:
                    self.widths[key] = width
        width = self._fitting_draft_width()
        if width == self.draft_width:
            return False
        self.draft_width = width
        if self.row_count:
            row = self.cursor_row
            self._clear_rows()
            self.add_rows([self._row(it) for it in self.iterations])
            self.move_cursor(row=row, animate=False, scroll=True)
            return True
        return False

    def on_resize(self) -> None:
        self._fit()

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key)

    def clear_iterations(self) -> None:
        self.iterations = []
        self.widths = dict(HEADER_WIDTHS)
        self._clear_rows()

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
        self._fit(iterations)
        self.add_rows([self._row(it) for it in iterations])
        if self.row_count:
            self.move_cursor(row=0, animate=False, scroll=True)

    def add_iterations(self, iterations: list[Iteration]) -> None:
        """Append rows (a live run). The cursor stays where it is: following the newest row would
        redraw the detail pane with every batch, drawing time the running decode would pay for.
        A few times a run (a longer draft, a tenth iteration) the rows are re-drawn to fit."""
        done = len(self.iterations)
        self.iterations.extend(iterations)
        if not self._fit(iterations):
            self.add_rows([self._row(it) for it in self.iterations[done:]])

    def select_last(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False, scroll=True)

    def select_iteration(self, k: int) -> None:
        if 0 <= k < self.row_count and k != self.cursor_row:
            self.move_cursor(row=k, animate=False, scroll=True)

    def _status_styles(self) -> dict[str, Style]:
        return {s: component_style(self, f"iteration-table--{s}") for s in ("acc", "rej", "unv")}

    def _row(self, it: Iteration) -> list:
        styles = self._status_styles()
        draft = Text(no_wrap=True, overflow="ellipsis")
        for n, row in enumerate(it.draft):
            if n:
                draft.append("│", style="dim")
            draft.append(row.text, style=styles.get(row.status))
        draft.truncate(self.draft_width, overflow="ellipsis")

        def bars(attr: str) -> Text:
            """One bar per draft position; nothing when the method has no such value (no helper: no q)."""
            values = [getattr(row, attr) for row in it.draft]
            if all(v is None for v in values):
                return Text("")
            return Text.assemble(*[(bar(v), styles.get(row.status)) for v, row in zip(values, it.draft, strict=False)])

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
