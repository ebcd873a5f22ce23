"""The footer: the keys of what can be done now, each readable at any width.

Textual's compact footer runs a group's label into the next key ("Change^q Quit"); the rules in
app.tcss space them. On a narrow terminal the keys that are also in the command palette (ctrl+p)
leave the footer, so that the rest fits in 80 columns; the keys themselves keep working.
"""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

#: Keys the footer leaves out below a width (each is in the command palette, ctrl+p, and keeps
#: working): (width, actions hidden below it). Measured with every key shown: 152 columns.
HIDDEN_BELOW: tuple[tuple[int, frozenset[str]], ...] = (
    (160, frozenset({"toggle_chat_template", "open_run", "toggle_mode"})),
    (140, frozenset({"pick_family", "save"})),
    (120, frozenset({"sweep", "compare_baseline"})),
)
#: What the narrow layout (below 120 columns) leaves out: the help (f1) stays, the history (h) goes.
NARROW_HIDDEN = frozenset().union(*(actions for _, actions in HIDDEN_BELOW), {"history"})


def hidden_at(width: int) -> frozenset[str]:
    """The actions whose keys the footer leaves out at ``width`` columns."""
    return frozenset().union(*(actions for below, actions in HIDDEN_BELOW if width < below))


class AppFooter(Footer):
    """`Footer` that leaves out the keys a terminal this wide has no room for (`HIDDEN_BELOW`)."""

    narrow: reactive[bool] = reactive(False, recompose=True)
    _composed_for: int | None = None  # the terminal width the keys were last composed for

    def compose(self):
        hidden = NARROW_HIDDEN if self.narrow else hidden_at(self.app.size.width)
        for widget in super().compose():
            if isinstance(widget, FooterKey) and widget.action in hidden:
                continue
            yield widget

    def on_resize(self) -> None:
        width = self.app.size.width
        if self._composed_for != width:
            self._composed_for = width
            self.call_after_refresh(self.recompose)
