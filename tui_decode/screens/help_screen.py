"""F1 (or ?): every figure the app shows in one sentence with its formula, then what each colour and
mark of the output, the iterations table, the detail, the gamma plot and the comparison means,
and the keys. The words come from `tui_decode.state.help_text`; this screen only lays them out.

Each section's rows are one widget (`HelpRows`) that lays out its columns itself: with a widget
per cell (251 of them) F1 took 1.7 s of the UI thread's time to build and lay out, 3.5 s on a
loaded machine, and keys waited that long.
"""

from __future__ import annotations

from typing import Sequence, cast

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Label

from tui_decode.state import help_text

#: Below this many columns of the terminal (80x24) each formula goes under its sentence, so the
#: sentence keeps the width; from there on the formula has a column of its own.
WIDE_FROM = 110


class HelpRows(Widget):
    """One section of the help: rows of two or three cells (label or sample, meaning, formula)
    drawn in columns by one widget. The first column is ``first`` cells wide (``first_narrow``
    below `WIDE_FROM`); the meaning takes the rest; a formula has a column of ``third`` cells at
    its right when the terminal is wide, else its lines go under the meaning's."""

    DEFAULT_CSS = "HelpRows { height: auto; }"
    GAP = 1
    #: Between the meaning and the formula: a rule, so that a meaning that fills its column does
    #: not run into the formula ("once per context T(k) = median ..." read as one sentence).
    FORMULA_GAP = Content.styled(" │ ", "$text-muted")

    def __init__(self, rows: Sequence[tuple[Content, ...]], first: int, first_narrow: int, third: int = 36,
                 classes: str = "") -> None:
        super().__init__(classes=classes)
        self.rows = list(rows)
        self.first, self.first_narrow, self.third = first, first_narrow, third
        self._laid_out: tuple[tuple[int, bool], list[Content]] | None = None

    @property
    def wide(self) -> bool:
        return self.app.size.width >= WIDE_FROM

    def lines(self, width: int) -> list[Content]:
        """The section's lines at ``width`` cells (kept until the width changes)."""
        key = (width, self.wide)
        if self._laid_out is None or self._laid_out[0] != key:
            self._laid_out = (key, self._lay_out(width, self.wide))
        return self._laid_out[1]

    def _lay_out(self, width: int, wide: bool) -> list[Content]:
        first = self.first if wide else self.first_narrow
        third = self.third if wide and any(len(row) > 2 and row[2] for row in self.rows) else 0
        formula_gap = self.FORMULA_GAP.cell_length
        second = max(width - first - self.GAP - (third + formula_gap if third else 0), 8)
        gap = " " * self.GAP
        out: list[Content] = []
        for row in self.rows:
            label, meaning, formula = (*row, Content(""))[:3]
            left = label.wrap(first)
            middle = meaning.wrap(second)
            right = formula.wrap(third) if third and formula else []
            if not third and formula:
                middle += formula.wrap(second)
            for i in range(max(len(left), len(middle), len(right))):
                cells: list[str | Content] = [_cell(left, i, first), gap, _cell(middle, i, second if third else 0)]
                if third:
                    cells += [self.FORMULA_GAP, _cell(right, i, 0)]
                out.append(Content.assemble(*cells))
        return out

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Content:
        return Content("\n").join(self.lines(self.content_size.width))

    def plain_cells(self) -> list[str]:
        """Every cell's text, unwrapped."""
        return [cell.plain for row in self.rows for cell in row if cell]


def _cell(lines: list[Content], i: int, width: int) -> Content:
    """Line ``i`` of a cell, padded to ``width`` cells (0: not padded, the row's last cell)."""
    line = lines[i] if i < len(lines) else Content("")
    return line.pad_right(width - line.cell_length) if width > line.cell_length else line


class HelpScreen(ModalScreen[None]):
    """The help: scrolls with the arrows and page keys; escape, q, F1 or ? closes it."""

    WIDE_FROM = WIDE_FROM

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        Binding("f1", "close", "Close", show=False),
        Binding("question_mark", "close", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help"):
            yield Label("Help · what every figure and colour means (escape closes)", classes="dialog-title")
            with VerticalScroll(id="help-body"):
                yield Label("Figures", classes="help-heading")
                yield HelpRows([(Content.styled(figure.labels[0], "bold"), Content(figure.meaning),
                                 Content.styled(figure.formula, "$text-secondary"))
                                for figure in (*help_text.FIGURES, *help_text.method_figures())],
                               first=20, first_narrow=16, classes="help-figures")
                for title, markings in help_text.SECTIONS:
                    yield Label(title, classes="help-heading")
                    yield HelpRows([(Content.from_markup(marking.sample), Content(marking.meaning))
                                    for marking in markings], first=22, first_narrow=16, classes="help-markings")
                yield Label("Keys", classes="help-heading")
                yield HelpRows([(Content(key), Content(meaning)) for key, meaning in help_text.KEYS],
                               first=22, first_narrow=16, classes="help-markings")

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def on_resize(self) -> None:
        for rows in self.query(HelpRows):
            rows.refresh(layout=True)  # wide or narrow: the columns follow the terminal

    def action_close(self) -> None:
        self.dismiss(None)

    def plain_text(self) -> str:
        """Everything the help says, as plain text (tests, and copying)."""
        parts: list[str] = []
        for widget in self.query("#help-body > *"):
            parts.extend(widget.plain_cells() if isinstance(widget, HelpRows) else [str(cast(Label, widget).visual)])
        return "\n".join(parts)
