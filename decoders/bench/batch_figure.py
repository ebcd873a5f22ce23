"""The synthetic cells of the batch bench (`decoders.bench.batch_synthetic`) drawn: for each batch
size, speedup against γ with, for each acceptance α, the cost-aware Theorem 3.8 curve (the
``predicted`` column: a solid line), the finite-budget prediction (``predicted_finite``: a dashed
line) and the measured decode speedups (one glyph per α, their spread a bar), break-even (1.0x) a
row of ``┈``, each curve named by its α at its right end, and how many cells came within 10% of
each prediction in the panel's title.

Plain text in a braille canvas (`decoders.analysis.canvas`): report.md puts it in a fenced block;
the app's batch screen (`tui_decode.widgets.synthetic_plot`) styles the same cells by their layer
(``alpha0``.. per acceptance value, ``even``, ``axis``, ``title``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from decoders.analysis.canvas import Canvas, speed_axis

if TYPE_CHECKING:
    from decoders.bench.batch_synthetic import SyntheticBatchRow

#: One glyph per acceptance value (a grid has at most `batch_synthetic.MAX_ALPHAS` = 8).
GLYPHS = ("●", "▲", "■", "◆", "★", "✚", "▼", "◉")
LABEL_WIDTH = 6  # "1.25x" and the axis
#: A panel's canvas in report.md: 48 cells (96 dots) wide, 10 rows (40 dots) high.
REPORT_COLUMNS = 48
PANEL_ROWS = 10
#: The least span of the speed axis, and the margin above and below the figures (a share of it).
MIN_SPAN = 0.1
MARGIN = 0.1
#: How close a measured cell must come to a prediction to count (|measured / predicted - 1|).
CLOSE = 0.10

Cells = list[tuple[str, str]]  # a line: (character, layer) per cell


def alpha_layer(index: int) -> str:
    return f"alpha{index}"


@dataclass(frozen=True)
class Scale:
    """From (γ, speedup) to a dot of a ``width`` x ``height`` dot canvas (y from the top)."""

    g_min: int
    g_max: int
    bottom: float
    top: float
    width: int
    height: int

    def x(self, gamma: float) -> int:
        return round((gamma - self.g_min) / max(self.g_max - self.g_min, 1) * (self.width - 1))

    def y(self, speed: float) -> int:
        clamped = min(max(speed, self.bottom), self.top)
        return round((1 - (clamped - self.bottom) / (self.top - self.bottom)) * (self.height - 1))


def speed_range(rows: Sequence[SyntheticBatchRow]) -> tuple[float, float]:
    """The speed axis's (bottom, top): both predictions, the measured points with their spread and
    break-even (1.0x), with a margin."""
    values = [1.0] + [v for r in rows for v in (r.predicted, r.predicted_finite) if v is not None]
    values += [r.decode_speedup + side * (r.spread or 0.0) for r in rows for side in (1, -1)]
    return speed_axis(values, MIN_SPAN, MARGIN)


def within(rows: Sequence[SyntheticBatchRow]) -> tuple[int, int]:
    """How many cells came within 10% of the finite prediction, and of Theorem 3.8."""
    finite = sum(1 for r in rows if r.ratio_finite is not None and abs(r.ratio_finite - 1) <= CLOSE)
    theorem = sum(1 for r in rows if r.ratio is not None and abs(r.ratio - 1) <= CLOSE)
    return finite, theorem


def panel_title(size: int, rows: Sequence[SyntheticBatchRow]) -> str:
    finite, theorem = within(rows)
    return (f"batch {size}: within 10% of the finite prediction in {finite} of {len(rows)} cells, "
            f"of Theorem 3.8 in {theorem} of {len(rows)}")


def draw_panel(rows: Sequence[SyntheticBatchRow], alphas: Sequence[float], columns: int,
               height: int) -> tuple[Canvas, Scale]:
    """The canvas of one batch size's cells: per α (its index in ``alphas`` its layer and glyph)
    Theorem 3.8 solid, the finite prediction dashed, the measured points as glyphs with their
    spread as a bar."""
    canvas = Canvas(columns, height)
    gammas = [r.gamma for r in rows] or [1]
    bottom, top = speed_range(rows)
    scale = Scale(min(gammas), max(gammas), bottom, top, canvas.width, canvas.height)
    for index, alpha in enumerate(alphas):
        cells = sorted((r for r in rows if r.alpha == alpha), key=lambda r: r.gamma)
        layer = alpha_layer(index)
        for values, dash in (([(r.gamma, r.predicted_finite) for r in cells], 2),
                             ([(r.gamma, r.predicted) for r in cells], 0)):
            dots = [(scale.x(g), scale.y(s)) for g, s in values if s is not None]
            for (x0, y0), (x1, y1) in zip(dots, dots[1:], strict=False):
                canvas.line(x0, y0, x1, y1, layer, dash=dash)
            for x, y in dots:  # each cell's value drawn, where a dash would leave it out
                canvas.dot(x, y, layer)
        for r in cells:
            x = scale.x(r.gamma)
            if r.spread:
                canvas.line(x, scale.y(r.decode_speedup + r.spread), x, scale.y(r.decode_speedup - r.spread), layer)
            canvas.mark(x, scale.y(r.decode_speedup), GLYPHS[index % len(GLYPHS)], layer)
    return canvas, scale


def panel_lines(size: int, rows: Sequence[SyntheticBatchRow], alphas: Sequence[float], columns: int,
                height: int = PANEL_ROWS) -> list[Cells]:
    """One batch size's panel: its title, the canvas with the speed axis's labels on the left and
    each α's name at the right end of its curve, the γ axis and its ticks."""
    canvas, scale = draw_panel(rows, alphas, columns, height)
    even = scale.y(1.0) // 4
    places = 1 if scale.top - scale.bottom >= 1.0 else 2
    ends: dict[int, list[int]] = {}  # text row -> the α (indices) whose curve ends there
    for index, alpha in enumerate(alphas):
        last = max((r for r in rows if r.alpha == alpha), key=lambda r: r.gamma, default=None)
        if last is not None:
            speed = last.predicted if last.predicted is not None else last.decode_speedup
            ends.setdefault(scale.y(speed) // 4, []).append(index)
    lines: list[Cells] = [[(panel_title(size, rows), "title")]]
    for row in range(height):
        label = f"{1:.{places}f}x" if row == even else f"{scale.top:.{places}f}x" if row == 0 else \
            f"{scale.bottom:.{places}f}x" if row == height - 1 else ""
        line: Cells = [(label.rjust(LABEL_WIDTH - 1) + "┤", "axis")]
        line += canvas.row_cells(row, ("┈", "even") if row == even else None)
        for index in ends.get(row, []):
            line.append((f" {GLYPHS[index % len(GLYPHS)]} α={alphas[index]:g}", alpha_layer(index)))
        lines.append(line)
    lines.append([(" " * (LABEL_WIDTH - 1) + "└" + "─" * columns, "axis")])
    ticks = [" "] * columns
    for gamma in sorted({r.gamma for r in rows}):
        text = str(gamma)
        start = min(max(scale.x(gamma) // 2 - len(text) // 2, 0), columns - len(text))
        if all(c == " " for c in ticks[max(start - 1, 0):start + len(text) + 1]):
            ticks[start:start + len(text)] = list(text)
    lines.append([("γ".rjust(LABEL_WIDTH - 1) + " " + "".join(ticks), "axis")])
    return lines


def legend(alphas: Sequence[float]) -> list[Cells]:
    """Two lines naming the series: the two predictions and break-even, then each α's glyph."""
    first: Cells = [("━ Theorem 3.8, cost-aware (predicted)", "title"), ("  ", ""),
                    ("╍ finite budget (predicted finite)", "title"), ("  ", ""), ("┈ break-even 1.0x", "even")]
    second: Cells = [("measured decode speedup, │ its spread:", "title")]
    for index, alpha in enumerate(alphas):
        second.append((f"  {GLYPHS[index % len(GLYPHS)]} α={alpha:g}", alpha_layer(index)))
    return [first, second]


def figure_lines(rows: Sequence[SyntheticBatchRow], columns: int = REPORT_COLUMNS,
                 height: int = PANEL_ROWS) -> list[Cells]:
    """The legend, then a panel per batch size (ascending), a blank line between them."""
    if not rows:
        return []
    alphas = sorted({r.alpha for r in rows})
    lines = legend(alphas)
    for size in sorted({r.batch for r in rows}):
        lines.append([])
        lines += panel_lines(size, [r for r in rows if r.batch == size], alphas, columns, height)
    return lines


def plain(line: Cells) -> str:
    return "".join(char for char, _ in line).rstrip()


def figure_section(rows: Sequence[SyntheticBatchRow]) -> list[str]:
    """The figure for report.md (and the printed report): in a fenced block, so Markdown keeps it."""
    if not rows:
        return []
    return ["### Measured against predicted, per α (synthetic)", "", "```text",
            *(plain(line) for line in figure_lines(rows)), "```"]
