"""The figures a run is judged by, the gamma curve, and one sentence saying why it was faster or
slower. While a run streams, the figures that can already be known are shown instead."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from decoders.records import RunResult
from decoders.theory import cost_aware_speedup
from tui_decode.widgets.gamma_plot import GammaPlot, PlotData
from tui_decode.widgets.iteration_table import BARS
from tui_decode.widgets.styles import component_style

SPARK_MAX = 28


def sparkline(values: list[int], width: int = SPARK_MAX) -> str:
    """Tokens emitted per iteration as block characters (the last ``width`` iterations)."""
    values = values[-width:]
    if not values:
        return ""
    top = max(values)
    return "".join(BARS[min(int((v / top) * (len(BARS) - 1)), len(BARS) - 1)] if top else BARS[0] for v in values)


class StatsPane(VerticalScroll):
    """Statistics of the shown run: figures, the gamma plot (speculative), the explanation."""

    COMPONENT_CLASSES = {"stats-pane--faster", "stats-pane--slower", "stats-pane--spark"}

    def compose(self) -> ComposeResult:
        self.figures = Static(id="figures")
        self.explanation = Static(id="explanation")
        self.plot = GammaPlot(id="gamma-plot")
        yield self.figures
        yield self.explanation  # before the plot: the one sentence must stay in view
        yield self.plot

    def on_mount(self) -> None:
        self.show_nothing()

    def show_nothing(self, message: str = "Run a method (ctrl+r) to see its figures.") -> None:
        self.figures.update(Text(message, style="dim"))
        self._plot(None)
        self.explanation.update("")

    def show_live(self, figures: dict[str, Any], phase: str) -> None:
        """Figures known mid-run: tokens, iterations, tokens per iteration, acceptance so far."""
        grid = self._grid()
        grid.add_row("tokens", f"{figures['tokens']}")
        grid.add_row("iterations", f"{figures['iterations']}")
        if figures.get("tau") is not None:
            grid.add_row("tokens / iter", f"{figures['tau']:.2f}")
        if figures.get("accept_rate") is not None:
            grid.add_row("acceptance", f"{figures['accept_rate']:.0%} of judged drafts")
        self.figures.update(grid)
        self._plot(None)
        self.explanation.update(
            Text(f"{phase}… timing figures and the explanation come when the run ends.", style="dim"))

    def show_result(self, result: RunResult) -> None:
        s = result.summary.to_json()
        grid = self._grid()
        grid.add_row("tokens", f"{s.get('tokens')} in {s.get('iterations')} iterations · {s.get('finish')}")
        if s.get("tau") is not None:
            if s.get("accept_rate") is not None:
                grid.add_row("tau · accept", f"{s['tau']:.2f} tokens/forward · {s['accept_rate']:.0%}")
            else:
                grid.add_row("tau", f"{s['tau']:.2f} tokens / target forward")
        speed = s.get("speedup_wall")
        if speed is not None:
            style = component_style(self, "stats-pane--faster" if speed >= 1.0 else "stats-pane--slower")
            grid.add_row("wall speedup", Text.assemble((f"{speed:.2f}x", style), " vs autoregressive"))
        grid.add_row("ms / token", f"{s.get('method_ms_per_token', 0):.1f} (baseline "
                                   f"{s.get('baseline_ms_per_token', 0):.1f})")
        if s.get("verify_cost") is not None:
            grid.add_row("verify cost", f"{s['verify_cost']:.2f} one-token steps")
        if "alpha_hat" in s:
            grid.add_row("α̂ · ĉ", f"{s['alpha_hat']:.2f} accept · {s['c_hat']:.2f} draft cost")
            predicted = f"{s['predicted_speedup']:.2f}x"
            if s.get("predicted_speedup_cost_aware") is not None:
                predicted += f" ({s['predicted_speedup_cost_aware']:.2f}x w/ verify cost)"
            grid.add_row("predicted", predicted)
            grid.add_row("best γ", f"{s.get('gamma_star')} (this run: {s.get('gamma')})")
        if "identical" in s:
            if s["identical"]:
                grid.add_row("identical", "yes, to the baseline")
            else:
                grid.add_row("identical", f"no: diverges at token {s.get('first_divergence')}")
        else:
            grid.add_row("identical", "not compared (sampling)")
        per_iter = [len(it.emit) for it in result.method.iters]
        if per_iter and not s.get("curve"):
            grid.add_row("per iteration", Text(sparkline(per_iter),
                                               style=component_style(self, "stats-pane--spark")))
        self.figures.update(grid)

        if s.get("curve"):
            cost = s.get("verify_cost")
            cost_curve = None
            if cost:
                cost_curve = [[g, round(cost_aware_speedup(s["alpha_hat"], int(g), s["c_hat"], cost), 3)]
                              for g, _ in s["curve"]]
            self._plot(PlotData(s["curve"], cost_curve, int(s.get("gamma") or 1), speed))
        else:
            self._plot(None)
        self.explanation.update(Text(s.get("explanation", ""), style="italic"))

    def _plot(self, data: PlotData | None) -> None:
        """Show the gamma plot (or hide it); its legend goes in the pane's bottom border."""
        self.plot.plot(data)
        self.plot.display = data is not None
        if data is None:
            self.border_subtitle = ""
            return
        legend = "[$text-primary]── predicted[/]"
        if data.cost_aware:
            legend += " [$text-secondary]── w/ verify cost[/]"
        self.border_subtitle = legend + " [$text-warning]● measured[/]"

    @staticmethod
    def _grid() -> Table:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        return grid
