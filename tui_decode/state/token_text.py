"""Tokens as the output shows them: their real text, from the display form records keep."""

from __future__ import annotations

from decoders.records.run import Run


def real_text(shown: str) -> str:
    """The text a token stands for, from its display form (`decoders.models.token_display.visible_text`).

    Records keep the display form only, so the token stream turns the markers back: "↵" is a
    newline and a token made only of "·" (and newlines) was whitespace. Other markers (tab "→",
    "<0x..>" bytes) stay visible; they are rare, and a real "→" in the text is not altered.
    """
    if "·" in shown and set(shown) <= {"·", "↵"}:
        shown = shown.replace("·", " ")
    return shown.replace("↵", "\n")


def run_tokens(run: Run) -> list[tuple[str, str, int]]:
    """(real text, kind, iteration) of each emitted token, from the run's iterations."""
    return [(real_text(e.text), e.kind, it.k) for it in run.iters for e in it.emit]
