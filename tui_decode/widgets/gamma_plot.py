"""Predicted speedup against gamma, drawn in braille, with the measured run as a point on it.

Each cell holds a 2x4 braille dot grid, so a 30x5 cell plot has 60x20 dots: enough to see where
the curve peaks and whether the measured run sits above or below break-even, with no plotting
library.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from tui_decode.widgets.styles import component_style

# Braille dot bits, indexed [row][column] within a cell.
DOT_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
LABEL_WIDTH = 5


class BrailleCanvas:
    """A grid of cells, each a braille character plus the layer (style name) that drew it last."""

    def __init__(self, columns: int, rows: int):
        self.columns, self.rows = columns, rows
        self.bits = [[0] * columns for _ in range(rows)]
        self.layer = [[""] * columns for _ in range(rows)]
        self.marks: dict[tuple[int, int], tuple[str, str]] = {}

    @property
    def width(self) -> int:
        return self.columns * 2

    @property
    def height(self) -> int:
        return self.rows * 4

    def dot(self, x: int, y: int, layer: str) -> None:
        """Set dot (x, y); y counts from the top."""
        if 0 <= x < self.width and 0 <= y < self.height:
            row, col = y // 4, x // 2
            self.bits[row][col] |= DOT_BITS[y % 4][x % 2]
            self.layer[row][col] = layer

    def line(self, x0: int, y0: int, x1: int, y1: int, layer: str) -> None:
        """Bresenham: every dot between the two ends."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        while True:
            self.dot(x0, y0, layer)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def mark(self, x: int, y: int, char: str, layer: str) -> None:
        """A whole-cell symbol at dot (x, y) drawn over the braille."""
        col, row = min(max(x // 2, 0), self.columns - 1), min(max(y // 4, 0), self.rows - 1)
        self.marks[(row, col)] = (char, layer)

    def row_text(self, row: int, styles: dict[str, Style]) -> Text:
        text = Text()
        for col in range(self.columns):
            if (row, col) in self.marks:
                char, layer = self.marks[(row, col)]
                text.append(char, style=styles.get(layer))
            else:
                bits = self.bits[row][col]
                text.append(chr(0x2800 + bits) if bits else " ", style=styles.get(self.layer[row][col]))
        return text


@dataclass
class PlotData:
    curve: list[list[float]]  # [[gamma, predicted speedup], ...] (Theorem 3.8)
    cost_aware: list[list[float]] | None  # the same with the measured verify cost
    gamma: int
    measured: float | None  # wall speedup of the run


class GammaPlot(Widget):
    """Speedup predicted for gamma 1..10, the break-even line at 1.0x, and the measured point."""

    COMPONENT_CLASSES = {
        "gamma-plot--curve",
        "gamma-plot--cost-aware",
        "gamma-plot--even",
        "gamma-plot--measured",
        "gamma-plot--axis",
    }

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.data: PlotData | None = None

    def plot(self, data: PlotData | None) -> None:
        self.data = data
        self.refresh()

    def render(self) -> RenderableType:
        data = self.data
        if data is None or not data.curve:
            return Text("")
        styles = {name: component_style(self, f"gamma-plot--{name}")
                  for name in ("curve", "cost-aware", "even", "measured", "axis")}
        rows = max(self.size.height - 2, 2)
        columns = max(self.size.width - LABEL_WIDTH - 1, 10)
        canvas = BrailleCanvas(columns, rows)
        gammas = [g for g, _ in data.curve]
        g_min, g_max = min(gammas), max(gammas)
        values = [s for _, s in data.curve] + [s for _, s in (data.cost_aware or [])] + [1.0]
        if data.measured is not None:
            values.append(data.measured)
        top = max(values) * 1.1

        def to_dot(gamma: float, speed: float) -> tuple[int, int]:
            x = round((gamma - g_min) / max(g_max - g_min, 1) * (canvas.width - 1))
            y = round((1 - speed / top) * (canvas.height - 1))
            return x, y

        _, even_y = to_dot(g_min, 1.0)
        for x in range(0, canvas.width, 3):
            canvas.dot(x, even_y, "even")
        for series, layer in ((data.cost_aware, "cost-aware"), (data.curve, "curve")):
            if not series:
                continue
            points = [to_dot(g, s) for g, s in series]
            for (x0, y0), (x1, y1) in zip(points, points[1:]):
                canvas.line(x0, y0, x1, y1, layer)
        if data.measured is not None:
            canvas.mark(*to_dot(data.gamma, data.measured), "●", "measured")

        out = Text()
        for row in range(rows):
            label = ""
            if row == 0:
                label = f"{top:.1f}x"
            elif row == even_y // 4:
                label = "1.0x"
            elif row == rows - 1:
                label = "0"
            out.append(label.rjust(LABEL_WIDTH - 1) + "┤", style=styles["axis"])
            out.append_text(canvas.row_text(row, styles))
            out.append("\n")
        axis = Text(" " * (LABEL_WIDTH - 1) + "└" + "─" * columns + "\n", style=styles["axis"])
        out.append_text(axis)
        ticks = [" "] * columns
        for g in sorted({g_min, data.gamma, g_max}):
            x, _ = to_dot(g, 0)
            label = f"γ{int(g)}"
            start = min(max(x // 2 - len(label) // 2, 0), columns - len(label))
            ticks[start:start + len(label)] = list(label)
        out.append(" " * LABEL_WIDTH + "".join(ticks), style=styles["axis"])
        return out
