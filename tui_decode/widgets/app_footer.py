"""The footer: the keys of what can be done now, each readable at any width.

Textual's compact footer runs a group's label into the next key ("Change^q Quit"); the rules in
app.tcss space them. On a narrow terminal the keys that are also in the command palette (ctrl+p)
leave the footer, so that the rest fits in 80 columns; the keys themselves keep working.
"""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

#: Actions whose keys the footer leaves out when narrow (each is in the command palette).
NARROW_HIDDEN = frozenset({"save", "open_run", "pick_family", "toggle_mode", "toggle_chat_template"})


class AppFooter(Footer):
    """`Footer` with fewer keys when `narrow` is set."""

    narrow: reactive[bool] = reactive(False, recompose=True)

    def compose(self):
        for widget in super().compose():
            if self.narrow and isinstance(widget, FooterKey) and widget.action in NARROW_HIDDEN:
                continue
            yield widget
