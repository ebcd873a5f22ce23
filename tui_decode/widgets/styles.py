"""Component-class styles as the widgets draw with them."""

from __future__ import annotations

from rich.style import Style
from textual.widget import Widget


def component_style(widget: Widget, name: str) -> Style:
    """The style of component class ``name`` alone (it layers over the text's own style), or no
    style while the widget has no stylesheet applied (being mounted, or the app shutting down)."""
    return widget.get_component_rich_style(name, partial=True, default=Style.null())
