"""Everything one iteration recorded: a summary line, then the view for its detail kind.

The views live in `tui_decode.widgets.details`, one module per kind (speculative top-k bars,
prompt-lookup match, Jacobi block, plain step); this frame picks one and draws it.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.style import Style
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from decoders.core.declarations import get_method
from decoders.core.errors import DecodeError
from decoders.core.params import METHOD_NAMES
from decoders.methods.shared.draft_policy import STOP_TEXT
from decoders.records.run import Iteration
from tui_decode.widgets.details import PLAIN, DetailContext, view_for
from tui_decode.widgets.details.base import emitted_drafts, output_cut
from tui_decode.widgets.details.plain import plain_step_text
from tui_decode.widgets.styles import component_style


def detail_of(it: Iteration, method: str) -> tuple[str, Any]:
    """The iteration's detail kind and record. An iteration without a record gets the kind its
    method declares, with no record (a prompt-lookup step without a match is still a lookup step)."""
    if it.detail is not None:
        return it.detail.kind, it.detail
    try:
        return get_method(method).detail or PLAIN, None
    except DecodeError:  # a saved run of a method this install does not have
        return PLAIN, None


class IterationDetail(VerticalScroll, can_focus=True):
    """The selected iteration in full; a hint when nothing is selected yet."""

    BORDER_TITLE = "Iteration detail"
    ALLOW_MAXIMIZE = True  # enter on a table row (or d) shows it full screen
    COMPONENT_CLASSES = {
        "iteration-detail--acc",
        "iteration-detail--rej",
        "iteration-detail--unv",
        "iteration-detail--bar-p",
        "iteration-detail--bar-q",
        "iteration-detail--chosen",
        "iteration-detail--heading",
        "iteration-detail--match",
    }

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.iteration: Iteration | None = None
        self.context = DetailContext()

    def compose(self):
        self.body = Static(id="detail-body")
        yield self.body

    def on_mount(self) -> None:
        self._refresh_body()

    def show(self, iteration: Iteration | None, context: DetailContext) -> None:
        self.iteration = iteration
        self.context = context
        self._refresh_body()

    def _style(self, name: str) -> Style:
        return component_style(self, f"iteration-detail--{name}")

    def _refresh_body(self) -> None:
        if not self.is_mounted:
            return
        body = self.body
        it = self.iteration
        if it is None:
            body.update(Text("Select an iteration in the table (or move the cursor in the output) to see "
                             "what was drafted and how it was verified.", style="dim"))
            self.border_title = self.BORDER_TITLE
            return
        self.border_title = f"Iteration {it.k} · {METHOD_NAMES.get(self.context.method, self.context.method)}"
        kind, detail = detail_of(it, self.context.method)
        parts: list[RenderableType] = [self._summary_line(it)]
        if it.draft_stop and not it.draft:  # nothing drafted: one line, with the policy's reason
            parts.append(Text(plain_step_text(it.draft_stop), style="dim"))
        else:
            if it.draft_stop:  # the adaptive draft policy's reason (and the hybrid's choice of draft), in words
                parts.append(Text(f"why this draft: {STOP_TEXT.get(it.draft_stop, it.draft_stop)}", style="dim"))
            parts.extend(view_for(kind)(it, detail, self.context, self._style))
        body.update(Group(*parts))
        self.scroll_home(animate=False)

    def _summary_line(self, it: Iteration) -> Text:
        line = Text()
        line.append(f"position {it.pos}", style=self._style("heading"))
        if it.draft:
            line.append(f" · drafted {len(it.draft)}, accepted {it.n_accepted}")
            if output_cut(it):
                line.append(f" ({emitted_drafts(it)} emitted: the output ended inside the draft)")
        line.append(f" · emitted {len(it.emit)}: ")
        for n, emitted in enumerate(it.emit):
            if n:
                line.append(" ")
            line.append(emitted.text, style=self._style({"acc": "acc", "fix": "rej"}.get(emitted.kind, "chosen")))
            line.append(f"({emitted.kind})", style="dim")
        timing = f" · verify {it.t_verify_ms:.1f} ms"
        if it.draft:
            timing = f" · draft {it.t_draft_ms:.1f} ms" + timing
        line.append(timing, style="dim")
        return line
