"""What every detail view shares: the context beside the iteration, the registry that picks a view
by detail kind, and the pieces several views draw (probability bars, the draft table)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from rich.console import RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from decoders.analysis.stats import depth_of
from decoders.core.declarations import baseline_method
from decoders.records.kinds import KIND_ACCEPTED, STATUS_ACCEPTED
from decoders.records.run import Iteration

BAR_WIDTH = 12
STATUS_WORDS = {"acc": "accepted", "rej": "rejected", "unv": "not reached"}
#: The view for an iteration without a detail record of its own.
PLAIN = "plain"

#: A component style of the detail frame by short name ("acc", "heading", ...).
StyleOf = Callable[[str], Style]


@dataclass
class DetailContext:
    """What the detail needs beside the iteration: the method and where the tokens sit."""

    method: str = field(default_factory=lambda: baseline_method().name)
    prompt: str = ""
    prompt_tokens: int | None = 0  # None while the run streams (the engine reports it at the end)
    output_tokens: list[str] = field(default_factory=list)  # display text of each emitted token


class DetailView(Protocol):
    """Draws one kind of iteration detail, below the frame's summary line."""

    def __call__(self, it: Iteration, detail: Any, context: DetailContext, style: StyleOf, /) -> list[RenderableType]:
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


def tree_depths(it: Iteration) -> list[int] | None:
    """Each draft row's depth when the rows form a tree (some row does not continue the one
    before it); None for a linear draft."""
    parents = [row.parent for row in it.draft]
    if all(p == i - 1 or (i == 0 and p < 0) for i, p in enumerate(parents)):
        return None
    depth: list[int] = []
    for i, p in enumerate(parents):
        depth.append(depth[p] + 1 if 0 <= p < i else 0)
    return depth


def depth_first(it: Iteration) -> list[int]:
    """Row indices of a draft tree, each node followed by its subtree (siblings in row order)."""
    children: dict[int, list[int]] = {}
    for i, row in enumerate(it.draft):
        children.setdefault(row.parent if 0 <= row.parent < i else -1, []).append(i)
    out: list[int] = []
    stack = list(reversed(children.get(-1, [])))
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(children.get(node, [])))
    return out


def emitted_drafts(it: Iteration) -> int:
    """Drafts of ``it`` that reached the output: a stop token (or the token limit) inside the
    draft ends the output there, and the accepted drafts after it were never emitted."""
    return sum(1 for e in it.emit if e.kind == KIND_ACCEPTED)


def output_cut(it: Iteration) -> bool:
    """True when the output ended inside this iteration's accepted drafts (a stop token or the
    token limit): no fix or bonus token followed them."""
    return bool(it.draft) and emitted_drafts(it) < it.n_accepted


def status_word(it: Iteration, n: int) -> str:
    """Draft row ``n``'s verdict in words; an accepted draft after the output ended says it was
    not emitted."""
    row = it.draft[n]
    if row.status == STATUS_ACCEPTED and depth_of(it.draft, n) >= emitted_drafts(it):
        return "accepted, not emitted"
    return STATUS_WORDS.get(row.status, row.status)


def draft_table(it: Iteration, style: StyleOf) -> Table:
    """Any drafted block: each draft token, its status and its q, p and acceptance probability.
    A tree of drafts is drawn indented: each node under its parent, the accepted path in the
    accepted colour, so one sees which branch the target followed."""
    depths = tree_depths(it)
    table = Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False, header_style="bold")
    for name in ("#", "token" if depths is None else "token tree", "status", "q", "p", "accept"):
        table.add_column(name, justify="right" if name in ("#", "q", "p", "accept") else "left")
    for n in (range(len(it.draft)) if depths is None else depth_first(it)):
        row = it.draft[n]
        row_style = style(row.status)
        token = Text(row.text, style=row_style)
        if depths is not None:
            token = Text("  " * depths[n] + ("└ " if depths[n] else "┬ "), style="dim") + token
        table.add_row(str(n + 1), token,
                      Text(status_word(it, n), style=row_style),
                      fmt_prob(row.q), fmt_prob(row.p), fmt_prob(row.acc_prob))
    return table


def flat(text: str) -> str:
    """Text on one line: newlines shown as the "↵" the tables use."""
    return text.replace("\n", "↵")
