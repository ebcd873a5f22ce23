"""Lookahead decoding: the n-gram pool before the step, the candidates it offered and what was
accepted, the Jacobi window that ran beside them, and (first step) the shape the run chose."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from decoders.records.run import Iteration
from tui_decode.widgets.details.base import DetailContext, StyleOf, draft_table, flat, register_view
from tui_decode.widgets.details.plain import plain_view


@register_view("lookahead")
def lookahead_view(it: Iteration, step: Any, context: DetailContext, style: StyleOf) -> list[RenderableType]:
    if step is None:
        return plain_view(it, step, context, style)
    head = Text("\npool ", style=style("heading"))
    head.append(f"{step.pool} window n-grams before this step; {step.hits} candidate{'s' if step.hits != 1 else ''} "
                "for the last token (the text's continuation first, then the pool's)")
    if it.draft:
        head.append(f", {step.accepted} token{'s' if step.accepted != 1 else ''} accepted")
    elif step.hits:
        head.append(": none paid for its positions, a plain step beside the window")
    else:
        head.append(": nothing to verify, a plain step beside the window")
    head.append(f"; the window added {step.added} new n-gram{'s' if step.added != 1 else ''}.")
    parts: list[RenderableType] = [head]
    if step.shape:
        parts.append(Text(f"shape {step.shape}", style="dim"))
    window = Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False, title_justify="left")
    window.add_column("window", style="bold")
    for n in range(len(step.window[0]) if step.window else 0):
        window.add_column(str(n + 1), no_wrap=True, overflow="ellipsis", max_width=14)
    for j, level in enumerate(step.window):
        window.add_row(f"level {j}", *[Text(flat(t)) for t in level])
    parts += [Text(""), window]
    if it.draft:
        parts.append(draft_table(it, style))
    return parts
