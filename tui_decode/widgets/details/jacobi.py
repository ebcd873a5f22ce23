"""Jacobi decoding: the block of guesses before and the model's answers after, with how many became
fixed."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from decoders.records.run import Iteration
from tui_decode.widgets.details.base import STATUS_WORDS, DetailContext, StyleOf, register_view
from tui_decode.widgets.details.plain import plain_view


@register_view("jacobi")
def jacobi_view(it: Iteration, block: Any, context: DetailContext, style: StyleOf) -> list[RenderableType]:
    if block is None or not block.before:  # a block of no guesses (the budget's last token): a plain step
        return plain_view(it, block, context, style)
    table = Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False)
    table.add_column("", style="bold")
    for n in range(len(block.before)):
        table.add_column(str(n + 1), no_wrap=True, overflow="ellipsis", max_width=14)
    statuses = [r.status for r in it.draft]
    table.add_row("before", *[Text(t[1], style=style(s)) for t, s in zip(block.before, statuses, strict=False)])
    table.add_row("after", *[Text(t[1]) for t in block.after])
    table.add_row("", *[Text(STATUS_WORDS.get(s, s), style=style(s)) for s in statuses])
    note = Text(f"\nblock of {len(block.before)} guesses → {block.fixed} fixed: the leading guesses the model "
                "reproduced, then its own next token; the answers after the first miss become the next "
                "iteration's guesses.", style="dim")
    return [Text(""), table, note]
