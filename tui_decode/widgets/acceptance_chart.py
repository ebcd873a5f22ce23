"""Per-position acceptance as one bar per draft position, and the acceptance-length histogram.

Each bar is drawn to the conditional rate (accepted at position i over drafts whose position i
was judged, i.e. every earlier position was accepted); its solid part is the unconditional rate
(vLLM's: accepted at i over all drafts), which can only be lower. The two numbers follow in the
legend's order, each after its glyph: "█ 40% ░ 50%". One Rich text, no widget per bar.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from decoders.analysis.summary import Summary
from tui_decode.widgets.iteration_table import BARS
from tui_decode.widgets.styles import component_style

BAR_WIDTH = 20
MAX_POSITIONS = 8  # longer drafts: the first positions, then a line saying how many more


def bar(solid: float, light: float, width: int = BAR_WIDTH) -> tuple[str, str, str]:
    """(solid blocks, light blocks, blank) for rates in 0..1, ``solid`` <= ``light``."""
    solid = min(max(solid, 0.0), 1.0)
    light = min(max(light, solid), 1.0)
    n_solid = round(solid * width)
    n_light = max(round(light * width) - n_solid, 0)
    return "█" * n_solid, "░" * n_light, " " * (width - n_solid - n_light)


def histogram_text(counts: list[int]) -> str:
    """Drafts by accepted tokens, as one block per length: "▇▃▁ " for [9, 4, 1, 0]."""
    top = max(counts, default=0)
    if not top:
        return ""
    return "".join(BARS[min(round(c / top * (len(BARS) - 1)), len(BARS) - 1)] if c else " " for c in counts)


def chart(summary: Summary, styles: Mapping[str, str | Style] | None = None) -> Text | None:
    """The chart for ``summary``, or None when the run judged no drafts at any position."""
    conditional = summary.per_position_acceptance_conditional or []
    unconditional = summary.per_position_acceptance or []
    if not conditional and not unconditional:
        return None
    styles = styles or {}
    n = max(len(conditional), len(unconditional))
    out = Text()
    out.append("per position", style="bold")
    out.append("  █ of all drafts  ░ if reached\n", style=styles.get("key"))
    for i in range(min(n, MAX_POSITIONS)):
        cond = conditional[i] if i < len(conditional) else None
        uncond = unconditional[i] if i < len(unconditional) else 0.0
        solid, light, blank = bar(uncond or 0.0, cond if cond is not None else uncond or 0.0)
        out.append(f"{i + 1:>2} ", style=styles.get("key"))
        out.append(solid, style=styles.get("bar"))
        out.append(light, style=styles.get("conditional"))
        out.append(blank + " ")
        # Each number after its own glyph, in the legend's order: of all drafts, then if reached.
        out.append("█", style=styles.get("bar"))
        out.append(f"{uncond or 0.0:>5.0%} ")
        out.append("░", style=styles.get("conditional"))
        out.append(("    –" if cond is None else f"{cond:>5.0%}") + "\n")
    if n > MAX_POSITIONS:
        out.append(f"   … {n - MAX_POSITIONS} more positions (the JSON has them all)\n", style=styles.get("key"))
    counts = summary.acceptance_length_histogram or []
    if any(counts):
        out.append("accepted per draft ", style="bold")
        out.append(histogram_text(counts), style=styles.get("bar"))
        out.append(f"  0..{len(counts) - 1}: " + " ".join(str(c) for c in counts), style=styles.get("key"))
    else:
        out.rstrip()
    return out


class AcceptanceChart(Static):
    """The per-position acceptance chart of the shown run (hidden when it drafted nothing)."""

    COMPONENT_CLASSES = {"acceptance-chart--bar", "acceptance-chart--conditional", "acceptance-chart--key"}
    summary: Summary | None = None  # the shown run's (`show`)

    def show(self, summary: Summary | None) -> None:
        self.summary = summary
        text = self._text()
        self.display = text is not None
        self.update(text or "")

    def _text(self) -> RenderableType | None:
        summary = self.summary
        if summary is None:
            return None
        styles = {name: component_style(self, f"acceptance-chart--{name}") for name in ("bar", "conditional", "key")}
        return chart(summary, styles)
