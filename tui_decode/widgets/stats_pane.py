"""The figures a run is judged by, the gamma curve, and one sentence saying why it was faster or
slower. While a run streams, the figures that can already be known are shown instead."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from decoders.errors import DecodeError
from decoders.methods.base import Figure, get_method
from decoders.records import RunResult
from decoders.summary import Summary
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


def method_figures(method: str) -> tuple[Figure, ...]:
    """The figures ``method`` declares; none for a method this install does not have."""
    try:
        return get_method(method).figures
    except DecodeError:
        return ()


def gamma_plot_data(s: Summary, speed: float | None) -> PlotData:
    """Speculative decoding's predicted speedup against gamma (``extras["curve"]``), with the
    cost-aware curve when the verify cost was measured."""
    extras = s.extras
    cost_curve = None
    if s.verify_cost:
        cost_curve = [[g, round(cost_aware_speedup(extras["alpha_hat"], int(g), extras["c_hat"], s.verify_cost), 3)]
                      for g, _ in extras["curve"]]
    return PlotData(extras["curve"], cost_curve, int(extras.get("gamma") or 1), speed)


class StatsPane(VerticalScroll):
    """Statistics of the shown run: figures, the gamma plot (speculative), the explanation."""

    BORDER_TITLE = "Statistics"
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
        """The run's `Summary`: the figures every method has, then the method's own (its
        `Figure`s, from ``Summary.extras``), then whether it matched the baseline."""
        s = result.summary
        grid = self._grid()
        grid.add_row("tokens", f"{s.tokens} in {s.iterations} iterations · {s.finish}")
        if s.tau is not None:
            if s.accept_rate is not None:
                grid.add_row("tau · accept", f"{s.tau:.2f} tokens/forward · {s.accept_rate:.0%}")
            else:
                grid.add_row("tau", f"{s.tau:.2f} tokens / target forward")
        speed = s.speedup_wall
        if speed is not None:
            style = component_style(self, "stats-pane--faster" if speed >= 1.0 else "stats-pane--slower")
            grid.add_row("wall speedup", Text.assemble((f"{speed:.2f}x", style), " vs autoregressive"))
        grid.add_row("ms / token", f"{s.method_ms_per_token or 0:.1f} (baseline {s.baseline_ms_per_token or 0:.1f})")
        if s.verify_cost is not None:
            grid.add_row("verify cost", f"{s.verify_cost:.2f} one-token steps")
        if s.identical is None:
            grid.add_row("identical", "not compared (sampling)")
        elif s.identical:
            grid.add_row("identical", "yes, to the baseline")
        else:
            grid.add_row("identical", f"no: diverges at token {s.first_divergence}")
        curve = s.extras.get("curve")
        per_iter = [len(it.emit) for it in result.method.iters]
        if per_iter and not curve:
            grid.add_row("per iteration", Text(sparkline(per_iter),
                                               style=component_style(self, "stats-pane--spark")))
        own = self._grid()  # the method's figures: a grid of their own, their labels run longer
        for figure in method_figures(s.method):
            value = s.extras.get(figure.key)
            if value is not None:
                own.add_row(figure.label, figure.shown(value))
        self.figures.update(Group(grid, own) if own.row_count else grid)
        self._plot(gamma_plot_data(s, speed) if curve else None)
        self.explanation.update(Text(s.explanation, style="italic"))

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
