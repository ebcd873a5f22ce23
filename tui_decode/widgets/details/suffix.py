"""Suffix decoding: the matched suffix, the tree it was found in (this request or the memory of
earlier responses), and the candidate path with each token's count and branch frequency."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from decoders.records.run import Iteration
from tui_decode.widgets.details.base import DetailContext, StyleOf, draft_table, flat, register_view

SOURCE_WORDS = {"request": "this prompt and the output so far", "memory": "an earlier response (the memory)"}


@register_view("suffix")
def suffix_view(it: Iteration, match: Any, context: DetailContext, style: StyleOf) -> list[RenderableType]:
    if match is None:
        return [Text("\nNo suffix of the sequence's tail has a continuation in this request or the memory, "
                     "so nothing was drafted: this iteration was a plain step.", style="dim")]
    head = Text("\nmatched ", style=style("heading"))
    head.append(f"{match.n}-token suffix \"")
    head.append(flat("".join(match.suffix)), style=style("match"))
    head.append(f"\" in {SOURCE_WORDS.get(match.source, match.source)}; "
                f"candidate score {match.score:.2f} (expected accepted tokens)")
    parts: list[RenderableType] = [head]
    if match.memory:
        parts.append(Text(f"  the memory held {match.memory} earlier response{'s' if match.memory != 1 else ''}",
                          style="dim"))
    parts.append(candidates(it, match))
    if len(it.draft) < match.found:
        cut = "nothing drafted" if not it.draft else f"cut to {len(it.draft)}"
        parts.append(Text(f"  the tree offered {match.found} token{'s' if match.found != 1 else ''}; {cut}: "
                          "a longer draft would not pay for its verify cost", style="dim"))
    if it.draft:
        parts.append(draft_table(it, style))
    return parts


def candidates(it: Iteration, match: Any) -> Table:
    """The candidate path: each token's count in the tree, its branch frequency and the running
    product (the chance the path survives that far, by the tree's counts)."""
    table = Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False, header_style="bold")
    for name in ("#", "count", "freq", "path"):
        table.add_column(name, justify="right")
    # a tree draft (``--suffix-mode tree``) names each node's parent in its rows; a path's row
    # continues the one before it
    tree = len(it.draft) == len(match.probs) and any(row.parent not in (i - 1, -2) for i, row in enumerate(it.draft))
    survive: list[float] = []
    for i, (count, prob) in enumerate(zip(match.counts, match.probs, strict=False)):
        parent = max(it.draft[i].parent, -1) if tree else i - 1
        survive.append((survive[parent] if parent >= 0 else 1.0) * prob)
        table.add_row(str(i + 1) + (f" (under {parent + 1})" if tree and parent >= 0 else ""), str(count),
                      f"{prob:.2f}", f"{survive[-1]:.2f}")
    return table
