"""Predicted speedup against the draft length, with the measured runs as points on it.

Drawn by hand in braille (each cell a 2x4 dot grid) rather than with textual-plotext: the plot
lives in a few rows of the statistics pane, where plotext's frame, tick labels and legend box
would leave the curves one or two rows; here every series has its own glyph as well as its own
theme colour (Theorem 3.8 a solid line, the cost-aware curve a dashed one, break-even a row of
``┈``, measured runs ``●`` with their spread as a bar), so they stay apart in any theme and in
a monochrome terminal, and a two-line legend names them with each curve's best draft length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from decoders.analysis.canvas import Canvas, speed_axis
from tui_decode.widgets.styles import component_style

LABEL_WIDTH = 6  # "0.97x" and the axis
#: The least span of the speed axis (a sweep of near-equal points is not magnified into noise),
#: and the margin above and below the figures, as a share of their span.
MIN_SPAN = 0.1
MARGIN = 0.1


class BrailleCanvas(Canvas):
    """The engine's braille canvas (`decoders.analysis.canvas`), each row styled by its layers."""

    def row_text(self, row: int, styles: dict[str, Style], fill: tuple[str, str] | None = None) -> Text:
        """One row of cells; ``fill`` (char, layer) goes in the cells no dot or mark took."""
        return styled(self.row_cells(row, fill), styles)


def styled(cells: list[tuple[str, str]], styles: dict[str, Style]) -> Text:
    """(character, layer) cells as text, each in its layer's style."""
    text = Text()
    for char, layer in cells:
        text.append(char, style=styles.get(layer))
    return text


@dataclass(frozen=True)
class Point:
    """One measured run: its draft length, its speedup and that speedup's spread (None: unknown)."""

    value: float  # where it sits on the x axis (the batch screen: log2 of the batch size)
    speedup: float
    spread: float | None = None
    glyph: str = "●"  # its series' mark (the batch screen's methods, each its own)


@dataclass
class PlotData:
    curve: list[list[float]]  # [[gamma, predicted speedup], ...] (Theorem 3.8); [] for no prediction
    cost_aware: list[list[float]] | None  # the same with the measured verify cost T(gamma + 1)
    gamma: float  # the draft length of the shown run (a tick on the axis)
    points: list[Point] = field(default_factory=list)  # measured runs
    name: str = "γ"  # what the x axis counts
    # each curve's best draft length over the whole range (the run's `gamma_star`s), where the
    # plot's range may end before it; None: the best of the points drawn
    best_curve: int | str | None = None
    best_cost_aware: int | str | None = None
    extrapolated: bool = False  # the best lengths rest on alpha_hat near 1 from few drafts
    series: tuple[tuple[str, str], ...] = ()  # (glyph, name) per series of points; (): one, "measured"
    ticks: tuple[tuple[float, str], ...] = ()  # (x, label) under the axis; (): each whole x and the run's

    def best(self, series: list[list[float]] | None) -> int | None:
        return int(max(series, key=lambda row: row[1])[0]) if series else None

    def best_text(self, series: list[list[float]] | None, whole: int | str | None) -> str:
        """The best length the legend names: the one over the whole range, marked when it lies past
        the plot's last length (or rests on little evidence)."""
        best: int | str | None = whole if whole is not None else self.best(series)
        edge = int(series[-1][0]) if series else 0
        past = isinstance(best, str) or (isinstance(best, int) and best > edge)
        marks = (["past the edge"] if past else []) + (["extrapolated"] if self.extrapolated else [])
        return f"{best}" + (f" ({', '.join(marks)})" if marks else "")


def speed_range(data: PlotData) -> tuple[float, float]:
    """The speed axis's (bottom, top): the curves, the measured points with their spread and
    break-even (1.0x), with a margin; not from 0, which flattened 0.86x-0.97x onto break-even."""
    values = [s for _, s in data.curve] + [s for _, s in (data.cost_aware or [])] + [1.0]
    values += [p.speedup + side * (p.spread or 0.0) for p in data.points for side in (1, -1)]
    return speed_axis(values, MIN_SPAN, MARGIN)


LEGEND_WIDTH = 46  # the statistics pane's inner width at 80 columns
LAYERS = ("curve", "cost-aware", "even", "measured", "axis")


def legend(data: PlotData, styles: dict[str, Style]) -> Text:
    """Two lines naming each series by its glyph and colour, with each curve's best length."""
    out = Text()
    first = []
    if data.curve:
        first.append(Text.assemble(("━ Thm 3.8", styles.get("curve", "")),
                                   f" best {data.name}{data.best_text(data.curve, data.best_curve)}"))
    if data.cost_aware:
        first.append(Text.assemble(("╍ cost-aware", styles.get("cost-aware", "")),
                                   f" best {data.name}{data.best_text(data.cost_aware, data.best_cost_aware)}"))
    if first:  # side by side where they fit the plot's pane, else one a line
        together = sum(len(t.plain) for t in first) + 2 * (len(first) - 1) <= LEGEND_WIDTH
        out.append_text(Text("  " if together else "\n").join(first))
        out.append("\n")
    names = [(f"{glyph} {name}", styles.get("measured", "")) for glyph, name in data.series] or \
        [("● measured", styles.get("measured", ""))]
    out.append_text(Text.assemble(("┈ break-even 1.0x", styles.get("even", "")), "  ",
                                  *[part for name in names for part in (name, " ")],
                                  ("│ spread", styles.get("measured", ""))))
    return out


class GammaPlot(Widget):
    """Speedup predicted against the draft length (both curves), the break-even line at 1.0x,
    the measured points with their spread, and a legend."""

    COMPONENT_CLASSES = {f"gamma-plot--{name}" for name in LAYERS}

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.data: PlotData | None = None

    def plot(self, data: PlotData | None) -> None:
        self.data = data
        self.refresh()

    def render(self) -> RenderableType:
        data = self.data
        if data is None or not (data.curve or data.points):
            return Text("")
        styles = {name: component_style(self, f"gamma-plot--{name}") for name in LAYERS}
        out = legend(data, styles)
        out.append("\n")
        top_rows = out.plain.count("\n")
        rows = max(self.size.height - top_rows - 2, 2)
        columns = max(self.size.width - LABEL_WIDTH - 1, 10)
        canvas = BrailleCanvas(columns, rows)
        gammas = [g for g, _ in data.curve] + [p.value for p in data.points] + [data.gamma]
        g_min, g_max = min(gammas), max(gammas)
        bottom, top = speed_range(data)

        def to_dot(gamma: float, speed: float) -> tuple[int, int]:
            x = round((gamma - g_min) / max(g_max - g_min, 1) * (canvas.width - 1))
            y = round((1 - (min(max(speed, bottom), top) - bottom) / (top - bottom)) * (canvas.height - 1))
            return x, y

        _, even_y = to_dot(g_min, 1.0)
        for series, layer, dash in ((data.cost_aware, "cost-aware", 2), (data.curve, "curve", 0)):
            if not series:
                continue
            points = [to_dot(g, s) for g, s in series]
            for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
                canvas.line(x0, y0, x1, y1, layer, dash=dash)
        for p in data.points:
            x, y = to_dot(p.value, p.speedup)
            if p.spread:
                _, lo = to_dot(p.value, p.speedup - p.spread)
                _, hi = to_dot(p.value, p.speedup + p.spread)
                canvas.line(x, hi, x, lo, "measured")
            canvas.mark(x, y, p.glyph, "measured")

        places = 1 if top - bottom >= 1.0 else 2  # 0.86x and 0.97x apart on a narrow range
        for row in range(rows):
            label = ""
            if row == even_y // 4:  # break-even: marked on every range
                label = f"{1:.{places}f}x"
            elif row == 0:
                label = f"{top:.{places}f}x"
            elif row == rows - 1:
                label = f"{bottom:.{places}f}x"
            out.append(label.rjust(LABEL_WIDTH - 1) + "┤", style=styles["axis"])
            fill = ("┈", "even") if row == even_y // 4 else None
            out.append_text(canvas.row_text(row, styles, fill))
            out.append("\n")
        axis = [("─", "axis")] * columns
        for series, layer in ((data.curve, "curve"), (data.cost_aware, "cost-aware")):
            best = data.best(series)
            if best is not None:  # the best length of each curve, under the axis in its colour
                x, _ = to_dot(best, 0)
                col = min(x // 2, columns - 1)
                axis[col] = ("▲", layer)
        out.append(" " * (LABEL_WIDTH - 1) + "└", style=styles["axis"])
        for char, layer in axis:
            out.append(char, style=styles[layer])
        out.append("\n")
        out.append_text(self._ticks(data, columns, lambda g: to_dot(g, 0)[0], styles["axis"]))
        return out

    @staticmethod
    def _ticks(data: PlotData, columns: int, x_of, style: Style) -> Text:
        """Each whole draft length that fits, the shown run's always."""
        ticks = [" "] * columns
        lo = int(min([g for g, _ in data.curve] + [p.value for p in data.points] + [data.gamma]))
        hi = int(max([g for g, _ in data.curve] + [p.value for p in data.points] + [data.gamma]))
        taken: list[tuple[int, int]] = []
        labels = list(data.ticks) or [(g, str(g)) for g in [data.gamma] + list(range(lo, hi + 1))]
        for g, label in labels:
            start = min(max(x_of(g) // 2 - len(label) // 2, 0), columns - len(label))
            span = (start - 1, start + len(label))
            if any(a <= span[1] and span[0] <= b for a, b in taken):
                continue
            taken.append((start, start + len(label) - 1))
            ticks[start:start + len(label)] = list(label)
        return Text(f"{data.name:>{LABEL_WIDTH - 1}} " + "".join(ticks), style=style)
