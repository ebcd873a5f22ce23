"""The figures a run is judged by, acceptance by draft position, the gamma curve, and one
sentence saying why it was faster or slower. While a run streams, the figures that can already
be known are shown instead.

The headline comes first, above the sentence: the decode speedup with its spread, both sides'
milliseconds per token, and whether the output matched the baseline's, so that the figure a run
is judged by is in view at every terminal size (the left column is short at 120x40). The rest
scrolls: the pane takes the focus (tab, or i) and the arrow and page keys move it.

Every speedup carries its spread (two standard errors from the timing noise measured in the same
run, `decoders.analysis.timing`): inside it the pane says "no measurable difference" in the plain colour;
green means faster beyond the spread, red slower beyond it."""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from decoders.analysis.spread_text import spread_places, value_with_spread
from decoders.analysis.summary import Summary, sentence
from decoders.analysis.theory import cost_aware_speedup
from decoders.analysis.verdict import Verdict, headline, verdict
from decoders.core.declarations import Figure, get_method
from decoders.core.errors import DecodeError
from decoders.records.run import RunResult
from tui_decode.state.run_history import headline_speed
from tui_decode.state.run_summary import acceptance_text, finish_text, judged_drafts, pairing_text
from tui_decode.widgets.acceptance_chart import AcceptanceChart
from tui_decode.widgets.gamma_plot import GammaPlot, PlotData, Point
from tui_decode.widgets.iteration_table import BARS
from tui_decode.widgets.styles import component_style

SPARK_MAX = 28
#: The headline's and the figures' label column: as wide as the longest label ("decode speedup"),
#: so that the two grids line up.
LABEL_WIDTH = len("decode speedup")


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


def _ms(x: float) -> str:
    """Milliseconds to three significant figures or so (a tiny model's 0.42 ms as well as 140 ms)."""
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def speed_text(speed: float, spread: float | None, v: Verdict | None = None) -> tuple[str, Verdict]:
    """(words, verdict) for a speedup: "1.35x +/- 0.04 faster", "3.09x slower (0.32x +/- 0.02)",
    "no measurable difference (0.97x +/- 0.05)" inside the spread; never "0.32x slower". ``v``:
    the verdict as the headline gives it (`decoders.analysis.verdict.headline`), else the
    speedup's own against its spread."""
    if not (math.isfinite(speed) and speed > 0):  # nothing measured: never "nanx slower"
        return "n/a", "unknown"
    if spread is not None and not math.isfinite(spread):
        spread = None
    if v is None:
        v = verdict(speed, spread)
    if v == "withheld":
        return f"no verdict: the machine's speed changed ({speed:.2f}x corrected)", v
    figure = value_with_spread(speed, spread)  # "+/- 0.004", never "+/- 0.00"
    if v == "even":
        return f"no measurable difference ({figure})", v
    if v == "unknown":
        return (f"{speed:.2f}x faster; spread not measured" if speed >= 1.0
                else f"{1.0 / speed:.2f}x slower ({speed:.2f}x; spread not measured)"), v
    if speed >= 1.0:
        return f"{figure} faster", v
    return f"{1.0 / speed:.{spread_places(spread)}f}x slower ({figure})", v


def speed_lines(words: str, room: int) -> str:
    """``words`` (see `speed_text`) on one line when ``room`` cells hold them; else broken where
    the figure's parenthesis or its spread begins, so that a wrap never splits "+/- 0.02" or
    "spread not measured" across lines."""
    if len(words) <= room:
        return words
    at = words.find(" (")
    if at > 0:
        return words[:at] + "\n" + words[at + 1:]
    at = words.find("; spread")
    if at > 0:  # "1.05x faster; spread not measured"
        return words[:at] + "\n(" + words[at + 2:] + ")"
    return words


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _pairs(series: Any) -> list[list[float]] | None:
    """``series`` when it is a list of [draft length >= 1, speedup] pairs of finite numbers (a
    saved run's extras are not declared types: a hand-edited one may hold anything), else None."""
    if not isinstance(series, list):
        return None
    for row in series:
        if not (isinstance(row, list) and len(row) == 2 and _number(row[0]) and _number(row[1])
                and 1 <= row[0] <= 1 << 16):
            return None
    return series


def gamma_plot_data(s: Summary) -> PlotData | None:
    """Speculative decoding's predicted speedup against gamma (``extras["curve"]``), the
    cost-aware curve with the measured T(gamma+1) (``extras["cost_curve"]``; a saved run from
    before T(k) was measured: its one verify cost), and the run as a measured point; None when
    the curve is not one (a saved run that holds something else there: no plot, not a crash)."""
    extras = s.extras
    curve = _pairs(extras.get("curve"))
    if not curve:
        return None
    cost_curve = _pairs(extras.get("cost_curve")) if extras.get("cost_curve") else None
    alpha, c_hat = extras.get("alpha_hat"), extras.get("c_hat")
    if (not cost_curve and _number(s.verify_cost) and s.verify_cost > 0 and _number(alpha) and _number(c_hat)
            and c_hat >= 0):
        cost_curve = _pairs([[g, round(cost_aware_speedup(alpha, int(g), c_hat, s.verify_cost), 3)]
                             for g, _ in curve])
    drafted = extras.get("gamma_used") or extras.get("gamma") or 1
    gamma = int(drafted) if _number(drafted) and 1 <= drafted <= 1 << 16 else 1  # where the run drafted
    speed = headline_speed(s)
    points = [Point(gamma, speed, s.speedup_spread)] if speed is not None else []
    best, best_cost = extras.get("gamma_star"), extras.get("gamma_star_cost_aware")
    if not isinstance(best_cost, (int, str)) or not extras.get("cost_curve"):
        best_cost = None  # the curve drawn is the one rebuilt from the verify cost: its own best
    return PlotData(curve, cost_curve, gamma, points, best_curve=best if isinstance(best, (int, str)) else None,
                    best_cost_aware=best_cost, extrapolated=bool(extras.get("gamma_star_extrapolated")))


class StatsPane(VerticalScroll):
    """Statistics of the shown run: figures, acceptance by position, the gamma plot
    (speculative), the explanation."""

    BORDER_TITLE = "Statistics"
    COMPONENT_CLASSES = {"stats-pane--faster", "stats-pane--slower", "stats-pane--even", "stats-pane--spark"}
    BINDINGS = [  # VerticalScroll's keys, named in the footer while the pane has the focus
        Binding("down", "scroll_down", "Scroll", key_display="↑↓"),
    ]
    #: the shown summary's `show_summary` arguments, drawn again when the width changes (None: none shown)
    _shown_summary: tuple[Any, ...] | None = None
    _drawn_width: int | None = None  # the content width the summary was last drawn at

    def compose(self) -> ComposeResult:
        self.headline = Static(id="headline")
        self.figures = Static(id="figures")
        self.explanation = Static(id="explanation")
        self.acceptance = AcceptanceChart(id="acceptance-chart")
        self.plot = GammaPlot(id="gamma-plot")
        yield self.headline  # first: the figures the run is judged by stay in view at every size
        yield self.explanation  # then the one sentence that says what the run bought
        yield self.figures
        yield self.acceptance
        yield self.plot

    def on_mount(self) -> None:
        self.show_nothing()

    def on_resize(self) -> None:
        shown = self._shown_summary
        if shown is not None and self.content_region.width != self._drawn_width:
            self._drawn_width = self.content_region.width
            self.show_summary(*shown)  # the speedups break where this width needs

    def show_nothing(self, message: str = "Run a method (ctrl+r) to see its figures; p picks a Spec-Bench "
                                          "prompt to start from.") -> None:
        self._shown_summary = None
        self._headline(None)
        self.figures.update(Text(message, style="dim"))
        self._plot(None)
        self.acceptance.show(None)
        self.explanation.update("")

    def show_live(self, figures: dict[str, Any], phase: str) -> None:
        """Figures known mid-run: tokens, iterations, tokens per iteration, acceptance so far."""
        self._shown_summary = None
        self._headline(None)
        grid = self._grid()
        grid.add_row("tokens", f"{figures['tokens']}")
        grid.add_row("iterations", f"{figures['iterations']}")
        if figures.get("tau") is not None:
            grid.add_row("tokens / iter", f"{figures['tau']:.2f}")
        if figures.get("accept_rate") is not None:
            judged = f" ({figures['accepted']}/{figures['judged']})" if figures.get("judged") is not None else ""
            grid.add_row("acceptance", f"{figures['accept_rate']:.0%} of judged drafts{judged}")
        self.figures.update(grid)
        self._plot(None)
        self.acceptance.show(None)
        self.explanation.update(
            Text(f"{phase}… timing figures and the explanation come when the run ends.", style="dim"))

    def show_result(self, result: RunResult) -> None:
        """The run's `Summary`, with its tokens per iteration and its baseline's length."""
        self.show_summary(result.summary, [len(it.emit) for it in result.method.iters], len(result.baseline.ids),
                          judged_drafts(result.method))

    def show_summary(self, s: Summary, per_iter: list[int] | None = None,
                     baseline_tokens: int | None = None, judged: int | None = None) -> None:
        """The headline (`headline_rows`), the sentence, then the figures every method has, then
        the method's own (its `Figure`s, from ``Summary.extras``); ``judged`` (the drafts the
        target judged) names the acceptance rate's counts."""
        self._headline(self.headline_rows(s))
        grid = self._grid()
        if s.prompt_tokens is not None:
            grid.add_row("prompt", f"{s.prompt_tokens} tokens")
        grid.add_row("tokens", f"{s.tokens} in {s.iterations} iterations, {finish_text(s.finish)}")
        if s.tau is not None:
            grid.add_row("tau", f"{s.tau:.2f} tokens / target forward")
            if s.accept_rate is not None:
                grid.add_row("acceptance", acceptance_text(s, judged))
        if s.ttft_ms is not None:
            base = f" (AR {_ms(s.baseline_ttft_ms)})" if s.baseline_ttft_ms is not None else ""
            grid.add_row("first token", f"{_ms(s.ttft_ms)} ms prefill{base}")
        if s.speedup_wall is not None and s.speedup_decode is not None:  # (else the headline's speedup)
            wall_spread = s.speedup_wall_spread if s.speedup_wall_spread is not None else s.speedup_spread
            grid.add_row("end to end", self._speed(s.speedup_wall, wall_spread))
        paired = pairing_text(s)
        if paired:
            grid.add_row("paired", paired)
        compared = s.compared_tokens
        short_baseline = baseline_tokens is not None and compared is not None and compared < baseline_tokens
        if compared is not None and (compared < s.tokens or short_baseline):
            ran = [f"run {s.tokens}"] if compared < s.tokens else []
            ran += [f"AR {baseline_tokens}"] if baseline_tokens is not None and compared < baseline_tokens else []
            grid.add_row("compared", f"over {compared} tokens ({', '.join(ran)})")
        if s.verify_cost is not None:
            grid.add_row("verify cost", f"{s.verify_cost:.2f} one-token steps")
        curve = s.extras.get("curve")
        if per_iter and not curve:
            grid.add_row("per iteration", Text(sparkline(per_iter),
                                               style=component_style(self, "stats-pane--spark")))
        own = self._grid()  # the method's figures: a grid of their own, their labels run longer
        for figure in method_figures(s.method):
            value = s.extras.get(figure.key)
            if value is not None:
                own.add_row(figure.label, figure.shown(value))
        self.figures.update(Group(grid, own) if own.row_count else grid)
        self._shown_summary = (s, per_iter, baseline_tokens, judged)
        self.acceptance.show(s)
        self._plot(gamma_plot_data(s) if curve else None)  # None for a curve that is not one
        self.explanation.update(Text(sentence(s), style="italic"))  # from the figures above it

    def headline_rows(self, s: Summary) -> Table:
        """What the run is judged by: the decode speedup with its spread (end to end when the
        decode rate was not measured), both sides' milliseconds per token, and whether the output
        is the baseline's."""
        grid = self._grid()
        h = headline(s)  # the figure the run is judged by, its spread and verdict: the sentence's too
        if s.speedup_decode is not None and h.verdict == "withheld":  # no verdict, in no colour
            raw = f" · {s.speedup_decode_raw:.2f}x raw" if s.speedup_decode_raw is not None else ""
            grid.add_row("decode speedup", f"{s.speedup_decode:.2f}x corrected{raw} · machine's speed changed")
        elif s.speedup_decode is not None:
            speed = self._speed(s.speedup_decode, h.spread, h.verdict)
            if s.speedup_decode_raw is not None and abs(s.speedup_decode_raw - s.speedup_decode) >= 0.005:
                speed.append(f" · raw {s.speedup_decode_raw:.2f}x", style="dim")
            grid.add_row("decode speedup", speed)
        elif s.speedup_wall is not None:  # too few tokens for a decode rate: end to end is the headline
            grid.add_row("speedup", self._speed(s.speedup_wall, h.spread, h.verdict))
        if s.decode_ms_per_token is not None:
            base = f" (AR {_ms(s.baseline_decode_ms_per_token)})" if s.baseline_decode_ms_per_token is not None else ""
            grid.add_row("decode", f"{_ms(s.decode_ms_per_token)} ms/token{base}")
        else:
            grid.add_row("ms / token",
                         f"{s.method_ms_per_token or 0:.1f} (baseline {s.baseline_ms_per_token or 0:.1f})")
        if s.identical is None:
            grid.add_row("identical", "not compared (sampling)")
        elif s.identical:
            grid.add_row("identical", "yes, to the baseline")
        else:
            grid.add_row("identical", f"no: diverges at token {s.first_divergence}")
        return grid

    def _headline(self, grid: Table | None) -> None:
        self.headline.update(grid if grid is not None else "")
        self.headline.display = grid is not None

    def _speed(self, speed: float, spread: float | None, v: Verdict | None = None) -> Text:
        """A speedup in words, green only beyond its spread when faster, red only beyond it when
        slower, plain inside it (or with no spread measured); on two lines where one is too narrow.
        ``v``: the headline's verdict where this is the headline."""
        words, shown = speed_text(speed, spread, v)
        room = self.content_region.width - LABEL_WIDTH - 1 - 1  # the label column, its padding, the scrollbar
        words = speed_lines(words, room if self.size.width else len(words))
        style = component_style(self, {"faster": "stats-pane--faster", "slower": "stats-pane--slower"}
                                .get(shown, "stats-pane--even"))
        return Text(words, style=style)

    def _plot(self, data: PlotData | None) -> None:
        """Show the gamma plot (or hide it); its legend is part of it."""
        self.plot.plot(data)
        self.plot.display = data is not None

    @staticmethod
    def _grid() -> Table:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True, min_width=LABEL_WIDTH)
        grid.add_column()
        return grid
