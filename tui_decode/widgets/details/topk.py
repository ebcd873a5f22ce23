"""Speculative decoding: the top-5 of p (target) and q (helper) at each draft position as bars, so
one sees why a draft passed or failed."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from decoders.records.run import Iteration, TopEntry
from tui_decode.widgets.details.base import (
    BAR_WIDTH,
    DetailContext,
    StyleOf,
    emitted_drafts,
    fmt_prob,
    output_cut,
    prob_bar,
    register_view,
    status_word,
)
from tui_decode.widgets.details.plain import plain_view


@register_view("topk")
def topk_view(it: Iteration, detail: Any, context: DetailContext, style: StyleOf) -> list[RenderableType]:
    if not detail:
        return plain_view(it, detail, context, style)
    top_p, top_q = detail.p, detail.q
    out: list[RenderableType] = []
    emitted = [e.token for e in it.emit]
    for i in range(len(top_p)):
        row = it.draft[i] if i < len(it.draft) else None
        head = Text()
        if row is not None:
            head.append(f"\n{i + 1}. draft ", style=style("heading"))
            head.append(row.text, style=style(row.status))
            head.append(f"  {status_word(it, i)}", style=style(row.status))
            head.append(f"   q {fmt_prob(row.q)}   p {fmt_prob(row.p)}   accept {fmt_prob(row.acc_prob)}",
                        style="dim")
        else:
            head.append(f"\n{i + 1}. bonus position", style=style("heading"))
            head.append(bonus_note(it), style="dim")
        chosen = emitted[i] if i < len(emitted) else None
        draft_token = row.token if row is not None else None
        qs = top_q[i] if i < len(top_q) else []
        out.extend([head, _bars(top_p[i], qs, (chosen, draft_token), style)])
    out.append(Text("\np: target model's top-5   q: helper's top-5   bold: the draft / the emitted token",
                    style="dim"))
    return out


def bonus_note(it: Iteration) -> str:
    """What the position after the last draft did: a bonus token only when every draft passed and
    the output had not ended inside the draft."""
    if output_cut(it):
        return (f"   no bonus: the output ended at draft {emitted_drafts(it)} (a stop token or the token "
                "limit), so the drafts after it and this position were never emitted")
    if it.n_accepted >= len(it.draft):
        return "   every draft passed: the target adds its own next token"
    return (f"   not reached: draft {it.n_accepted + 1} was rejected, and the target's own token "
            "replaced it there")


def _bars(ps: list[TopEntry], qs: list[TopEntry], marked: tuple[int | None, int | None], style: StyleOf) -> Table:
    """p's and q's top entries side by side, rank by rank; the draft and the emitted token in bold."""
    grid = Table.grid(padding=(0, 1))
    for _ in range(2):
        grid.add_column(width=2)
        grid.add_column(width=12, no_wrap=True, overflow="ellipsis")
        grid.add_column(width=BAR_WIDTH, no_wrap=True)
        grid.add_column(width=5, justify="right")
    for rank in range(max(len(ps), len(qs))):
        cells: list[RenderableType] = []
        for label, entries, bar_style in (("p", ps, "bar-p"), ("q", qs, "bar-q")):
            entry: TopEntry | None = entries[rank] if rank < len(entries) else None
            cells.append(Text(label if rank == 0 else "", style="bold"))
            if entry is None:
                cells.extend([Text(""), Text(""), Text("")])
                continue
            mark = style("chosen") if entry.token in marked else Style()
            cells.append(Text(entry.text, style=mark))
            cells.append(Text(prob_bar(entry.prob), style=style(bar_style)))
            cells.append(Text(f"{entry.prob:.2f}"))
        grid.add_row(*cells)
    return grid
