"""What every detail view shares: the context beside the iteration, the registry that picks a view
by detail kind, and the pieces several views draw (probability bars, the draft table)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from rich.console import RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from decoders.records import Iteration

BAR_WIDTH = 12
STATUS_WORDS = {"acc": "accepted", "rej": "rejected", "unv": "not reached"}
#: The view for an iteration without a detail record of its own.
PLAIN = "plain"

#: A component style of the detail frame by short name ("acc", "heading", ...).
StyleOf = Callable[[str], Style]


@dataclass
class DetailContext:
    """What the detail needs beside the iteration: the method and where the tokens sit."""

    method: str = "ar"
    prompt: str = ""
    prompt_tokens: int | None = 0  # None while the run streams (the engine reports it at the end)
    output_tokens: list[str] = field(default_factory=list)  # display text of each emitted token


class DetailView(Protocol):
    """Draws one kind of iteration detail, below the frame's summary line."""

    def __call__(self, it: Iteration, detail: Any, context: DetailContext, style: StyleOf) -> list[RenderableType]:
        ...


_VIEWS: dict[str, DetailView] = {}


def register_view(kind: str) -> Callable[[DetailView], DetailView]:
    """Decorator: ``view`` draws iteration details of ``kind``."""

    def add(view: DetailView) -> DetailView:
        _VIEWS[kind] = view
        return view

    return add


def view_for(kind: str | None) -> DetailView:
    """The view registered for ``kind``; the plain view for an unknown kind or none."""
    return _VIEWS.get(kind or PLAIN) or _VIEWS[PLAIN]


def view_kinds() -> tuple[str, ...]:
    return tuple(_VIEWS)


# -- shared pieces --------------------------------------------------------------------------------
def prob_bar(prob: float, width: int = BAR_WIDTH) -> str:
    """A probability as a bar of eighth blocks, ``width`` cells for 1.0."""
    eighths = round(max(0.0, min(prob, 1.0)) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (" ▏▎▍▌▋▊▉"[part] if part else "")).ljust(width)


def fmt_prob(value: float | None) -> str:
    return "  -  " if value is None else f"{value:.3f}"


def draft_table(it: Iteration, style: StyleOf) -> Table:
    """Any drafted block: each draft token, its status and its q, p and acceptance probability."""
    table = Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False, header_style="bold")
    for name in ("#", "token", "status", "q", "p", "accept"):
        table.add_column(name, justify="right" if name in ("#", "q", "p", "accept") else "left")
    for n, row in enumerate(it.draft):
        row_style = style(row.status)
        table.add_row(str(n + 1), Text(row.text, style=row_style),
                      Text(STATUS_WORDS.get(row.status, ""), style=row_style),
                      fmt_prob(row.q), fmt_prob(row.p), fmt_prob(row.acc_prob))
    return table


def flat(text: str) -> str:
    """Text on one line: newlines shown as the "↵" the tables use."""
    return text.replace("\n", "↵")
