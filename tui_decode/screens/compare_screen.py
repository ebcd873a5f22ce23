"""Two token streams side by side, line for line at the same token positions, each coloured by
how its tokens were emitted, with the first token where they part marked on both sides; above
them both runs' time on one wall-clock axis (prefill, draft, verify)."""

from __future__ import annotations

import time

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Footer, Static

from tui_decode.screens.keys import QUIT
from tui_decode.state.exports import comparison_markdown, stream_figures
from tui_decode.state.run_history import Comparison, stream_tokens
from tui_decode.state.runs_folder import write_new
from tui_decode.state.token_text import shown_controls
from tui_decode.widgets.aligned_stream import AlignedStream
from tui_decode.widgets.timeline_strip import TimelineStrip
from tui_decode.widgets.token_stream import legend_markup


class CompareScreen(Screen[None]):
    """``comparison.left`` beside ``comparison.right``; escape goes back."""

    BINDINGS = [
        Binding("escape", "close", "Back"),
        Binding("j", "jump_divergence", "To divergence"),
        Binding("tab", "switch_side", "Other side", show=False),
        Binding("x", "export", "Export"),
        # The workbench's run and file keys still act on the main screen beneath (ctrl+s says why it
        # saves nothing from here); ctrl+q first, where the footer has always shown it.
        QUIT,
        Binding("ctrl+r", "on_main('run')", "Run", priority=True, tooltip="Decode the prompt on the main screen"),
        Binding("ctrl+s", "on_main('save')", "Save", priority=True, tooltip="Save the run the main screen shows"),
        Binding("ctrl+o", "on_main('open_run')", "Open", priority=True, tooltip="Open a saved run"),
    ]

    def __init__(self, comparison: Comparison) -> None:
        super().__init__()
        self.comparison = comparison

    def compose(self) -> ComposeResult:
        self.heading = Static(id="compare-summary")
        self.left = AlignedStream(id="compare-left", classes="pane")
        self.right = AlignedStream(id="compare-right", classes="pane")
        self.left.partner, self.right.partner = self.right, self.left
        self.timeline = TimelineStrip(id="compare-timeline")
        self.figures = Static(id="compare-figures")
        yield self.heading
        yield self.figures
        yield self.timeline
        with Horizontal(id="compare-panes"):
            yield self.left
            yield self.right
        yield Footer(compact=True)

    def on_mount(self) -> None:
        c = self.comparison
        at = c.divergence if c.same_prompt else None  # different prompts: no divergence to mark
        self.left.show_aligned(stream_tokens(c.left.run), at)
        self.right.show_aligned(stream_tokens(c.right.run), at)
        self.left.relayout_with_partner()
        self.left.border_title = escape(shown_controls(c.left.label))  # a title is markup; labels come from files
        self.right.border_title = escape(shown_controls(c.right.label))
        self.left.border_subtitle = legend_markup()
        self.right.border_subtitle = "[$text-error]≠ first divergence[/]"
        heading = Text()
        heading.append("Compare  ", style="bold")
        heading.append(c.summary())
        self.heading.update(heading)
        self.timeline.show([(self._short(c.left), c.left.run), (self._short(c.right), c.right.run)])
        self.figures.update(self._figures_table())
        self.left.focus()
        if at is not None:
            self.call_after_refresh(self.action_jump_divergence)

    def _figures_table(self) -> Table:
        """Both sides' figures in one table, a column each."""
        c = self.comparison
        table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False, header_style="bold")
        table.add_column("figure", style="dim", no_wrap=True)
        table.add_column(self._short(c.left), no_wrap=True)
        table.add_column(self._short(c.right), no_wrap=True)
        for (name, a), (_, b) in zip(stream_figures(c.left), stream_figures(c.right), strict=True):
            table.add_row(name, a, b)
        return table

    def action_export(self) -> None:
        """x: the comparison as Markdown in the runs folder (written atomically)."""
        from decoders.core.errors import DecodeError
        from decoders.records import atomic

        main = self.app.screen_stack[0]
        folder = getattr(main, "runs_folder", None)
        if folder is None:
            self.notify("No runs folder to export to.", severity="warning")
            return
        text = comparison_markdown(self.comparison)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = write_new(folder, f"{time.strftime('%Y%m%d-%H%M%S')}-compare", ".md",  # never over one
                             lambda p: atomic.write_text(p, text, "the comparison", exclusive=True))
        except (OSError, DecodeError) as error:
            self.notify(str(error), title="Not exported", severity="error", timeout=10)
            return
        self.notify(f"Exported {path.name} to {folder}", title="Compare")

    @staticmethod
    def _short(stream) -> str:
        return f"#{stream.entry.number} {'AR' if stream.role == 'baseline' else stream.run.method}"

    async def action_on_main(self, action: str) -> None:
        """The main screen's ``action`` (the screen at the bottom of the stack)."""
        await self.app.run_action(action, self.app.screen_stack[0])

    def action_close(self) -> None:
        self.dismiss(None)

    def action_jump_divergence(self) -> None:
        """Bring the line where the streams part into view, the cursor on its token."""
        at = self.comparison.divergence
        if not self.comparison.same_prompt:
            self.notify("The two runs are of different prompts: their tokens are not compared.")
            return
        if at is None:
            self.notify("The two streams are identical: there is no divergence.")
            return
        side = self.left if at < self.left.token_count else self.right
        line = side.line_of(at)
        if line is not None:
            side.scroll_to(y=max(line - side.scrollable_content_region.height // 2, 0), animate=False,
                           immediate=True)
        if at < side.token_count:
            side.cursor = at
            side.refresh()

    def action_switch_side(self) -> None:
        (self.right if self.left.has_focus else self.left).focus()
