"""The statistics pane's figures from a fabricated `Summary` (no model, no timing): speedups in words
with their spread, the colour only beyond the spread, prefill apart from decode, the compared
token count, the acceptance chart and the gamma plot's series."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.app import App, ComposeResult

from decoders.analysis.summary import Summary
from tui_decode.widgets.acceptance_chart import chart
from tui_decode.widgets.gamma_plot import GammaPlot, PlotData, Point
from tui_decode.widgets.stats_pane import StatsPane, speed_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def summary(**kw) -> Summary:
    base = dict(method="ar", label="Autoregressive", finish="length", tokens=32, target_forwards=32,
                baseline_forwards=32, iterations=32, tau=1.0, speedup_wall=0.97, baseline_ms=100.0, method_ms=103.0,
                baseline_ms_per_token=3.1, method_ms_per_token=3.2, target_fwd_ms=3.0, prompt_tokens=17,
                ttft_ms=12.5, decode_ms_per_token=3.05, baseline_ttft_ms=12.0, baseline_decode_ms_per_token=2.96,
                speedup_decode=0.97, speedup_spread=0.05, compared_tokens=32, drift=1.0)
    base.update(kw)
    return Summary(**base)


class PaneApp(App):
    CSS_PATH = "../../tui_decode/app.tcss"

    def compose(self) -> ComposeResult:
        yield StatsPane(id="stats-pane", classes="pane")


def cell(pane: StatsPane, label: str) -> Text:
    """The value the headline or the figures grid shows beside ``label``."""
    labels, values = [], []
    for widget in (pane.headline, pane.figures):
        content = widget.content
        grid = content.renderables[0] if hasattr(content, "renderables") else content
        if hasattr(grid, "columns"):
            labels += [str(c) for c in grid.columns[0]._cells]
            values += grid.columns[1]._cells
    value = values[labels.index(label)]
    return value if isinstance(value, Text) else Text(str(value))


def style_of(pane: StatsPane, name: str):
    return pane.get_component_rich_style(f"stats-pane--{name}", partial=True)


async def test_inside_the_spread_is_neutral_and_beyond_it_is_red():
    app = PaneApp()
    async with app.run_test(size=(60, 40)) as pilot:
        pane = app.query_one(StatsPane)
        pane.show_summary(summary(), baseline_tokens=32)  # AR at 0.97x +/- 0.05: noise
        await pilot.pause()
        speed = cell(pane, "decode speedup")  # (broken before its parenthesis where the pane is narrow)
        assert " ".join(speed.plain.split()) == "no measurable difference (0.97x +/- 0.05)"
        assert speed.style == style_of(pane, "even") != style_of(pane, "slower")
        assert cell(pane, "end to end").style == style_of(pane, "even")

        pane.show_summary(summary(method="spec", speedup_decode=0.32, speedup_wall=0.35, speedup_spread=0.02))
        await pilot.pause()
        speed = cell(pane, "decode speedup")
        assert speed.plain == "3.12x slower (0.32x +/- 0.02)"  # never "0.32x slower"
        assert speed.style == style_of(pane, "slower")

        pane.show_summary(summary(method="pld", speedup_decode=1.35, speedup_wall=1.3, speedup_spread=0.04))
        await pilot.pause()
        assert cell(pane, "decode speedup").plain == "1.35x +/- 0.04 faster"
        assert cell(pane, "decode speedup").style == style_of(pane, "faster")


async def test_prefill_decode_prompt_and_compared_tokens_are_shown():
    app = PaneApp()
    async with app.run_test(size=(60, 40)) as pilot:
        pane = app.query_one(StatsPane)
        pane.show_summary(summary(tokens=20, finish="cancelled", compared_tokens=20), baseline_tokens=32)
        await pilot.pause()
        assert cell(pane, "prompt").plain == "17 tokens"
        assert cell(pane, "first token").plain == "12.5 ms prefill (AR 12.0)"
        assert cell(pane, "decode").plain == "3.0 ms/token (AR 3.0)"
        assert cell(pane, "compared").plain == "over 20 tokens (AR 32)"
        pane.show_summary(summary(), baseline_tokens=32)  # the whole run compared: no such row
        await pilot.pause()
        with pytest.raises(ValueError):
            cell(pane, "compared")


def test_speed_words():
    assert speed_text(1.0, 0.03) == ("no measurable difference (1.00x +/- 0.03)", "even")
    assert speed_text(0.5, None) == ("2.00x slower (0.50x; spread not measured)", "unknown")
    assert speed_text(1.2, None) == ("1.20x faster; spread not measured", "unknown")


def test_acceptance_chart_draws_conditional_over_unconditional():
    s = summary(method="spec", per_position_acceptance=[0.8, 0.4, 0.1],
                per_position_acceptance_conditional=[0.8, 0.5, 0.25], acceptance_length_histogram=[2, 4, 3, 1])
    lines = chart(s).plain.splitlines()
    assert lines[0] == "per position  █ of all drafts  ░ if reached"
    assert lines[1] == " 1 ████████████████     █  80% ░  80%"
    # solid to 40% of all drafts, light to 50% if reached: each number after its glyph, in the legend's order
    assert lines[2] == " 2 ████████░░           █  40% ░  50%"
    assert lines[3] == " 3 ██░░░                █  10% ░  25%"
    assert lines[4] == "accepted per draft ▅█▆▃  0..3: 2 4 3 1"
    assert chart(summary()) is None  # autoregressive: no drafts, no chart


async def test_gamma_plot_tells_its_series_apart():
    class PlotApp(App):
        CSS = "GammaPlot { height: 12; width: 50; }"

        def compose(self) -> ComposeResult:
            yield GammaPlot()

    app = PlotApp()
    async with app.run_test(size=(60, 20)) as pilot:
        plot = app.query_one(GammaPlot)
        curve = [[g, round(2.0 - abs(g - 5) * 0.2, 3)] for g in range(1, 11)]
        cost = [[g, round(1.4 - abs(g - 3) * 0.15, 3)] for g in range(1, 11)]
        plot.plot(PlotData(curve, cost, 4, [Point(4, 1.5, 0.1), Point(6, 0.8, 0.05)]))
        await pilot.pause()
        text = plot.render().plain
        lines = text.splitlines()
        assert lines[0] == "━ Thm 3.8 best γ5  ╍ cost-aware best γ3"
        assert lines[1] == "┈ break-even 1.0x  ● measured │ spread"
        assert "\n".join(lines[2:]).count("●") == 2  # one mark per measured run
        assert "┈" in next(line for line in lines[2:] if line.lstrip().startswith("1.0x"))
        assert lines[-2].count("▲") == 2  # each curve's best gamma under the axis
        assert lines[-1].split() == ["γ", *[str(g) for g in range(1, 11)]]

        plot.plot(PlotData([[g, 1.5] for g in range(1, 11)], [[g, 1.2] for g in range(1, 11)], 4, []))
        await pilot.pause()
        rows = plot.render().plain.splitlines()[2:-2]
        flat = [row[6:] for row in rows if row[6:].strip() and "┈" not in row]  # (after the axis' labels)
        assert len(flat) == 2 and " " not in flat[0].strip() and "⠀ " not in flat[0]  # Thm 3.8: solid
        assert flat[1].strip().count(" ") >= 10  # cost-aware: dashed


def test_cost_aware_curve_is_dashed_and_theorem_curve_solid():
    from tui_decode.widgets.gamma_plot import BrailleCanvas

    solid, dashed = BrailleCanvas(10, 1), BrailleCanvas(10, 1)
    solid.line(0, 1, 19, 1, "curve")
    dashed.line(0, 1, 19, 1, "cost-aware", dash=2)
    assert solid.row_text(0, {}).plain == "⠒" * 10  # every cell drawn
    assert dashed.row_text(0, {}).plain == "⠒ " * 5  # two dots on, two off: every other cell
