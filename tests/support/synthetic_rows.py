"""Synthetic cells of the batch bench with fixed values (no timing): what the drawing tests and the
synthetic figure's snapshot draw."""

from __future__ import annotations

from textual.app import App, ComposeResult

from decoders.bench.batch_synthetic import SyntheticBatchRow
from tui_decode.widgets.synthetic_plot import SyntheticPlot


def cell(batch: int, alpha: float, gamma: int, predicted: float, finite: float, measured: float,
         spread: float | None = 0.05) -> SyntheticBatchRow:
    return SyntheticBatchRow(
        label=f"synthetic α={alpha:g} γ={gamma}", batch=batch, alpha=alpha, gamma=gamma, cost=0.05, throughput=10.0,
        ar_throughput=10.0, speedup=measured, decode_speedup=measured, spread=spread, verify_cost=1.1,
        predicted=predicted, ratio=round(measured / predicted, 3), alpha_hat=alpha, judged=100,
        predicted_at_alpha_hat=predicted, c_hat=0.05, identical=True, predicted_finite=finite,
        ratio_finite=round(measured / finite, 3))


def fixed_rows() -> list[SyntheticBatchRow]:
    """Batch 1 and 4, α 0.5 and 0.9, γ 1..4: Theorem 3.8 rising with α and falling with batch size,
    the finite prediction below it, the measured points about the finite prediction."""
    rows = []
    for batch, verify in ((1, 0.05), (4, 0.2)):
        for alpha in (0.5, 0.9):
            for gamma in (1, 2, 3, 4):
                tokens = (1 - alpha ** (gamma + 1)) / (1 - alpha)
                predicted = round(tokens / (1 + gamma * (0.05 + verify)), 3)
                finite = round(predicted * 0.92, 3)
                measured = round(finite * (1.03 if gamma % 2 else 0.9), 3)
                rows.append(cell(batch, alpha, gamma, predicted, finite, measured))
    return rows


class FigureApp(App[None]):
    """The batch screen's synthetic figure alone, drawing `fixed_rows`."""

    def compose(self) -> ComposeResult:
        yield SyntheticPlot(id="figure")

    def on_mount(self) -> None:
        self.query_one(SyntheticPlot).plot(fixed_rows())
