"""Two runs' time on one axis (`tui_decode.state.timeline`): a row per run, each column the phase
that filled it, coloured from the theme, and the milliseconds of each phase after the bar."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from decoders.records.run import Run
from tui_decode.state.timeline import GLYPH, PHASES, Span, columns, shares, spans, total_ms
from tui_decode.widgets.styles import component_style


class TimelineStrip(Static):
    """``show([(label, run), ...])``: the runs on a shared wall-clock axis."""

    COMPONENT_CLASSES = {f"timeline-strip--{phase}" for phase in PHASES}
    LABEL = 10

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.runs: list[tuple[str, list[Span]]] = []
        self._drawn_width = -1

    def show(self, runs: list[tuple[str, Run]]) -> None:
        self.runs = [(label, spans(run)) for label, run in runs]  # once, not at every resize
        self.refresh_strip()

    def on_resize(self) -> None:
        if self.size.width != self._drawn_width:
            self.refresh_strip()

    def refresh_strip(self) -> None:
        if not self.runs:
            self.update("")
            return
        self._drawn_width = self.size.width
        if not self.size.width:  # not laid out yet: its first resize draws it
            return
        longest = max(total_ms(run) for _, run in self.runs) or 1.0
        width = max(self.size.width - self.LABEL - 2, 10)
        out = Text()
        for label, run in self.runs:
            out.append(f"{label[: self.LABEL]:<{self.LABEL}} ", style="bold")
            for phase in columns(run, width, longest):
                style = component_style(self, f"timeline-strip--{phase}") if phase in PHASES else None
                out.append(GLYPH[phase], style=style)
            out.append("\n")
        key = Text(" " * (self.LABEL + 1))
        for phase in PHASES:
            key.append(f"{GLYPH[phase]} {phase}  ", style=component_style(self, f"timeline-strip--{phase}"))
        for label, run in self.runs:
            ms = shares(run)
            key.append(f" · {label}: " + " ".join(f"{phase} {ms[phase]:.0f}" for phase in PHASES) + " ms")
        out.append_text(key)
        self.update(out)
