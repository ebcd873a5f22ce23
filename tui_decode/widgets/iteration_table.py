"""One row per iteration: what was drafted, how verification judged it, and what it cost."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from decoders.records import Iteration
from tui_decode.widgets.styles import component_style

BARS = "▁▂▃▄▅▆▇█"
DRAFT_CELL_WIDTH = 22  # the least the drafted tokens get; more when the table is wider
OTHER_COLUMNS_WIDTH = 70  # the other columns with their padding, about
DRAFT_CELL_MAX = 160
COLUMNS = (
    ("#", "k"),
    ("pos", "pos"),
    ("drafted tokens", "draft"),
    ("q", "q"),
    ("p", "p"),
    ("acc", "acc"),
    ("emit", "emit"),
    ("draft ms", "t_draft"),
    ("verify ms", "t_verify"),
)


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

    BORDER_TITLE = "Iterations"
    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | {
        "iteration-table--acc",
        "iteration-table--rej",
        "iteration-table--unv",
    }
    BINDINGS = [Binding("enter", "select_cursor", "Detail", show=True)]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self.iterations: list[Iteration] = []
        self.draft_width = DRAFT_CELL_WIDTH

    def on_resize(self) -> None:
        """The drafted tokens get the width the other columns leave (drafts are cut at 22 cells
        in an 80-column terminal, not at 200)."""
        width = min(max(DRAFT_CELL_WIDTH, self.scrollable_content_region.width - OTHER_COLUMNS_WIDTH), DRAFT_CELL_MAX)
        if width != self.draft_width:
            self.draft_width = width
            if self.iterations:
                row = self.cursor_row
                self.clear()
                self.add_rows([self._row(it) for it in self.iterations])
                self.move_cursor(row=row, animate=False, scroll=True)

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key)

    def clear_iterations(self) -> None:
        self.iterations = []
        self.clear()

    def show_iterations(self, iterations: list[Iteration]) -> None:
        """A whole run at once: the cursor starts on the first iteration."""
        self.clear_iterations()
        self.iterations.extend(iterations)
        self.add_rows([self._row(it) for it in iterations])
        if self.row_count:
            self.move_cursor(row=0, animate=False, scroll=True)

    def add_iterations(self, iterations: list[Iteration]) -> None:
        """Append rows (a live run). The cursor stays where it is: following the newest row would
        redraw the detail pane with every batch, drawing time the running decode would pay for."""
        self.iterations.extend(iterations)
        self.add_rows([self._row(it) for it in iterations])

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
            return Text.assemble(*[(bar(v), styles.get(row.status)) for v, row in zip(values, it.draft)])

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
