"""One line saying what is happening (loading, baseline, method, done, cancelled, error), with a
progress bar while a load or a run is under way. A message longer than the terminal is wide
wraps onto a second line (at most three), never cut: it names folders and what a cancel kept."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from tui_decode.state.token_text import shown_controls
from tui_decode.widgets.styles import component_style

BAR_CELLS = 24
STATES = ("idle", "busy", "done", "cancelled", "error")


def progress_bar(fraction: float, cells: int = BAR_CELLS) -> tuple[str, str]:
    """(filled, empty) parts of a bar in eighth blocks."""
    eighths = round(max(0.0, min(fraction, 1.0)) * cells * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")
    return filled, "─" * (cells - len(filled))


class StatusLine(Widget):
    """What the app is doing now; the bar shows when the current task reports its progress."""

    COMPONENT_CLASSES = {
        "status-line--idle",
        "status-line--busy",
        "status-line--done",
        "status-line--cancelled",
        "status-line--error",
        "status-line--bar",
        "status-line--bar-empty",
    }

    message: reactive[str] = reactive("")
    state: reactive[str] = reactive("idle")
    fraction: reactive[float | None] = reactive(None)

    _lines = 1  # the lines the message took when the layout last changed

    def set(self, message: str, state: str = "idle", fraction: float | None = None) -> None:
        self.message = shown_controls(message)  # a file's name may hold an ESC sequence
        self.state = state if state in STATES else "idle"
        self.fraction = fraction
        lines = self._wrapped_lines()
        if lines != self._lines:  # the height follows (a run's progress, every batch, keeps its line)
            self._lines = lines
            self.refresh(layout=True)

    def _wrapped_lines(self) -> int:
        """The lines the message takes at the line's width (beside the bar when there is one)."""
        width = self.content_region.width - (BAR_CELLS + 6 if self.fraction is not None else 0)
        if not self.is_mounted or width <= 0:
            return self._lines
        return len(Text(self.message).wrap(self.app.console, width))

    def render(self) -> RenderableType:
        grid = Table.grid(expand=True)
        grid.add_column(ratio=1, overflow="fold")
        text = Text(self.message, style=component_style(self, f"status-line--{self.state}"))
        if self.fraction is None:
            grid.add_row(text)
            return grid
        grid.add_column(width=BAR_CELLS + 6, no_wrap=True)
        filled, empty = progress_bar(self.fraction)
        bar = Text.assemble(
            (filled, component_style(self, "status-line--bar")),
            (empty, component_style(self, "status-line--bar-empty")),
            f" {self.fraction:4.0%}",
        )
        grid.add_row(text, bar)
        return grid
