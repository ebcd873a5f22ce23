"""F1 (or ?): every figure the app shows in one sentence with its formula, then what each colour and
mark of the output, the iterations table, the detail, the gamma plot and the comparison means,
and the keys. The words come from `tui_decode.state.help_text`; this screen only lays them out."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from tui_decode.state import help_text


class HelpScreen(ModalScreen[None]):
    """The help: scrolls with the arrows and page keys; escape, q, F1 or ? closes it.

    Below `WIDE_FROM` columns (80x24) each formula goes under its sentence, so the sentence keeps
    the width (`-narrow`, app.tcss); from there on the formula has a column of its own."""

    WIDE_FROM = 110
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE_FROM, "-wide")]

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
                with Grid(classes="help-figures"):
                    for figure in (*help_text.FIGURES, *help_text.method_figures()):
                        yield Static(Content(figure.labels[0]), classes="help-label")
                        with Horizontal(classes="help-entry"):  # vertical when narrow: the formula under
                            yield Static(Content(figure.meaning), classes="help-meaning")
                            yield Static(Content(figure.formula), classes="help-formula")
                for title, markings in help_text.SECTIONS:
                    yield Label(title, classes="help-heading")
                    with Grid(classes="help-markings"):
                        for marking in markings:
                            yield Static(Content.from_markup(marking.sample), classes="help-sample")
                            yield Static(Content(marking.meaning), classes="help-meaning")
                yield Label("Keys", classes="help-heading")
                with Grid(classes="help-markings"):
                    for key, meaning in help_text.KEYS:
                        yield Static(Content(key), classes="help-sample")
                        yield Static(Content(meaning), classes="help-meaning")

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def plain_text(self) -> str:
        """Everything the help says, as plain text (tests, and copying)."""
        return "\n".join(str(widget.visual) for widget in self.query("#help-body Static, #help-body Label"))
