"""Tokens as the output shows them: their real text, from the display form records keep."""

from __future__ import annotations

import re

from decoders.records.run import Run

#: Terminal control characters but tab and newline (C0, DEL, C1): sent as they are, ESC starts a
#: sequence the terminal acts on (its title, its clipboard, the screen cleared).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return chr(0x2400 + code) if code < 0x20 else "\u2421" if code == 0x7F else "\ufffd"


#: Bidirectional controls (ALM, LRM, RLM, the embeddings and overrides U+202A..U+202E, the
#: isolates U+2066..U+2069): no width to Rich, yet a terminal may give each a cell or reorder what
#: follows (a prompt then wrapped mid-word and lost a character at each wrap). Never sent as they are.
BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _bidi_escape(match: re.Match[str]) -> str:
    return f"⟨U+{ord(match.group(0)):04X}⟩"


def shown_controls(text: str) -> str:
    """``text`` as a terminal may be sent it: each control character but tab and newline as its
    picture ("␛" for ESC), each bidirectional control as its code ("⟨U+202E⟩"), the rest as it is.
    For text measured after this (a title, a line laid out from it); see `drawn_in_place`."""
    if _CONTROL.search(text):
        text = _CONTROL.sub(_picture, text)
    return BIDI.sub(_bidi_escape, text) if BIDI.search(text) else text


def drawn_in_place(text: str) -> str:
    """``text`` already laid out in cells (a TextArea line): control characters as their pictures,
    bidirectional controls left out (they have no width there, so nothing else moves)."""
    if _CONTROL.search(text):
        text = _CONTROL.sub(_picture, text)
    return BIDI.sub("", text) if BIDI.search(text) else text


def bidi_controls(text: str) -> int:
    """How many bidirectional controls ``text`` holds."""
    return len(BIDI.findall(text))


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
