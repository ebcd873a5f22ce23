"""An iteration without a detail record: an autoregressive step, or a draft recorded without one."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from decoders.methods.shared.draft_policy import STOP_BUDGET, STOP_TEXT
from decoders.records.run import Iteration
from tui_decode.widgets.details.base import PLAIN, DetailContext, StyleOf, draft_table, register_view

PLAIN_STEP = "A plain step: one target forward, one token, nothing drafted"
#: Why a draft policy drafted nothing, where its own words (`STOP_TEXT`) speak of a draft.
NOTHING_DRAFTED = {STOP_BUDGET: "no tokens were left to draft (the budget's last token is this step's own)"}


def plain_step_text(draft_stop: str = "") -> str:
    """The line for an iteration that drafted nothing, with the draft policy's reason when it gave
    one: said once, not as a draft length beside "nothing drafted"."""
    if not draft_stop:
        return PLAIN_STEP + "."
    why = NOTHING_DRAFTED.get(draft_stop) or STOP_TEXT.get(draft_stop, draft_stop).removeprefix("no draft: ")
    return f"{PLAIN_STEP}: {why}."


@register_view(PLAIN)
def plain_view(it: Iteration, detail: Any, context: DetailContext, style: StyleOf) -> list[RenderableType]:
    if it.draft:
        return [draft_table(it, style)]
    return [Text(plain_step_text(it.draft_stop), style="dim")]
