"""The batch screen's table and plot (`tui_decode.screens.batch_screen`, issue 39): each method's
speedup against batch size beside autoregressive decoding at the same size."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from tui_decode.state.batch_plan import GLYPHS
from tui_decode.widgets.gamma_plot import PlotData, Point

if TYPE_CHECKING:
    from decoders.bench.batch import BatchRow


def batch_plot(rows: Sequence[BatchRow]) -> PlotData:
    """Each method's speedup against batch size with its spread, one glyph per method, on a log2
    axis of batch size (1, 2, 4 ... 64 evenly apart) with each measured size a tick; break-even
    (1.0x: autoregressive decoding at the same batch size) marked."""
    measured = [r for r in rows if r.method != "ar"]
    points = [Point(math.log2(r.batch), r.speedup, r.spread, GLYPHS.get(r.method, "◆")) for r in measured]
    methods = list(dict.fromkeys(r.method for r in measured))
    sizes = sorted({r.batch for r in measured}) or [1]
    return PlotData([], None, math.log2(sizes[0]), points, "B", series=tuple((GLYPHS.get(m, "◆"), m) for m in methods),
                    ticks=tuple((math.log2(b), str(b)) for b in sizes))


def batch_table(rows: Sequence[BatchRow]) -> Table:
    """A row per method and batch size: speedup with its spread, throughput over all sequences,
    autoregressive decoding's beside it, mean latency per sequence, whether every sequence equals
    its batch-1 output."""
    grid = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
    for column in ("method", "B", "speedup ± spread", "tok/s", "AR tok/s", "latency", "same"):
        grid.add_column(column, no_wrap=True, min_width=len(column))
    for r in rows:
        speed = "baseline" if r.method == "ar" else \
            f"{r.speedup:.2f}x" + ("" if r.spread is None else f" ± {r.spread:.2f}")
        grid.add_row(r.method, str(r.batch), speed, f"{r.throughput:.1f}", f"{r.ar_throughput:.1f}",
                     f"{r.latency_s:.2f} s", "yes" if r.identical else "no")
    return grid
