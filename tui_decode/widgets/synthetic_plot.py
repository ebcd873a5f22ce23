"""The batch screen's synthetic cells drawn (`tui_decode.screens.batch_screen`, issue 39): per batch
size, measured decode speedup against γ beside the cost-aware Theorem 3.8 curve (solid) and the
finite-budget prediction (dashed) for each acceptance α, break-even marked, with how many cells
came within 10% of each prediction. The drawing is the bench report's
(`decoders.bench.batch_figure`), each layer in its theme colour: each α its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text
from textual.widget import Widget

from decoders.bench.batch_figure import GLYPHS, LABEL_WIDTH, PANEL_ROWS, alpha_layer, figure_lines
from tui_decode.widgets.gamma_plot import styled
from tui_decode.widgets.styles import component_style

if TYPE_CHECKING:
    from decoders.bench.batch_synthetic import SyntheticBatchRow

LAYERS = (*(alpha_layer(i) for i in range(len(GLYPHS))), "even", "axis", "title")
#: The canvas's columns at most, and the room kept right of it for each curve's "● α=0.9".
MOST_COLUMNS = 96
NAME_ROOM = 10
HEADING = "synthetic acceptance (a measuring instrument, not a method): measured against predicted, per α"


class SyntheticPlot(Widget):
    """The synthetic cells measured so far, a panel per batch size; hidden while there are none."""

    DEFAULT_CSS = """
    SyntheticPlot {
        height: auto;
        margin-top: 1;
        & > .synthetic-plot--alpha0 { color: $text-primary; }
        & > .synthetic-plot--alpha1 { color: $text-warning; }
        & > .synthetic-plot--alpha2 { color: $text-success; }
        & > .synthetic-plot--alpha3 { color: $text-error; }
        & > .synthetic-plot--alpha4 { color: $text-secondary; }
        & > .synthetic-plot--alpha5 { color: $text-accent; }
        & > .synthetic-plot--alpha6 { color: $foreground; text-style: bold; }
        & > .synthetic-plot--alpha7 { color: $foreground-muted; }
        & > .synthetic-plot--even { color: $text-muted; }
        & > .synthetic-plot--axis { color: $foreground-darken-3; }
        & > .synthetic-plot--title { color: $foreground; }
    }
    """
    COMPONENT_CLASSES = {f"synthetic-plot--{name}" for name in LAYERS}

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.rows: list[SyntheticBatchRow] = []
        self.display = False

    def plot(self, rows: Sequence[SyntheticBatchRow]) -> None:
        self.rows = list(rows)
        self.display = bool(self.rows)
        self.refresh(layout=True)

    def render(self) -> RenderableType:
        if not self.rows:
            return Text("")
        styles = {name: component_style(self, f"synthetic-plot--{name}") for name in LAYERS}
        columns = max(min(self.size.width - LABEL_WIDTH - NAME_ROOM, MOST_COLUMNS), 16)
        out = Text(HEADING, style="bold")
        for line in figure_lines(self.rows, columns, PANEL_ROWS):
            out.append("\n")
            out.append_text(styled(line, styles))
        return out
