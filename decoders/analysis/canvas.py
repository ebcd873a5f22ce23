"""A braille canvas: a grid of text cells, each a 2x4 dot grid, with the layer (a name the caller
styles) that drew each cell last and whole-cell marks over the dots. Plain text only: the app's
plots (`tui_decode.widgets.gamma_plot`, `tui_decode.widgets.synthetic_plot`) give each layer a
style; the bench's reports (`decoders.bench.batch_figure`) write the characters as they are."""

from __future__ import annotations

# Braille dot bits, indexed [row][column] within a cell.
DOT_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
BLANK = " "


class Canvas:
    """A grid of cells, each a braille character plus the layer that drew it last."""

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

    def is_set(self, x: int, y: int) -> bool:
        """Whether dot (x, y) is drawn."""
        return bool(self.bits[y // 4][x // 2] & DOT_BITS[y % 4][x % 2])

    def line(self, x0: int, y0: int, x1: int, y1: int, layer: str, dash: int = 0) -> None:
        """Bresenham: every dot between the two ends (``dash`` > 0: ``dash`` dots on, ``dash`` off)."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        step = 0
        while True:
            if not dash or (step // dash) % 2 == 0:
                self.dot(x0, y0, layer)
            step += 1
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

    def row_cells(self, row: int, fill: tuple[str, str] | None = None) -> list[tuple[str, str]]:
        """One row as (character, layer) per cell; ``fill`` (char, layer) goes in the cells no dot
        or mark took."""
        cells = []
        for col in range(self.columns):
            if (row, col) in self.marks:
                cells.append(self.marks[(row, col)])
                continue
            bits = self.bits[row][col]
            if not bits and fill is not None:
                cells.append(fill)
            else:
                cells.append((chr(0x2800 + bits) if bits else BLANK, self.layer[row][col]))
        return cells


def speed_axis(values: list[float], min_span: float = 0.1, margin: float = 0.1) -> tuple[float, float]:
    """A speed axis's (bottom, top) over ``values`` (curves, points with their spread, break-even):
    at least ``min_span`` wide (near-equal points are not magnified into noise), widened by
    ``margin`` of the span each side, never below 0."""
    low, high = min(values), max(values)
    if high - low < min_span:
        middle = (high + low) / 2
        low, high = middle - min_span / 2, middle + min_span / 2
    pad = (high - low) * margin
    return max(low - pad, 0.0), high + pad
