"""An iteration without a detail record: an autoregressive step, or a draft recorded without one."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from decoders.records import Iteration
from tui_decode.widgets.details.base import PLAIN, DetailContext, StyleOf, draft_table, register_view


@register_view(PLAIN)
def plain_view(it: Iteration, detail: Any, context: DetailContext, style: StyleOf) -> list[RenderableType]:
    if it.draft:
        return [draft_table(it, style)]
    return [Text("A plain step: one target forward, one token, nothing drafted.", style="dim")]
