"""The method the app's first run uses when nobody chose one: speculative decoding, unless the
draft the family chose on this machine is not predicted to pay here.

On a CPU every extra verified position costs a share of a step, so a model draft pays only where
it is both cheap and accepted. On an AVX2 machine (2026-12-04) the bundled family chose its trained
head, predicted 1.08x from its measured cost (0.15 of a step) and acceptance (35% on the choice's
own requests); on the app's default prompt it accepted 0 of 4 drafts and read 0.87x, with no
accepted token on the first screen, while prompt lookup, whose draft costs nothing, read 1.73x on
the same prompt (11 of 17 drafts accepted). A first run should show what parallel decoding buys
here, so the app then starts on prompt lookup and says why; `m` picks speculative decoding.
"""

from __future__ import annotations

from typing import Any

from decoders.core.params import METHOD_NAMES, DecodeParams

#: A chosen model draft predicted below this speedup does not open the app (the choice's own
#: prediction has a spread of a few hundredths: below 1.10x it may well not pay at all).
START_PAYS = 1.10
#: The method the app starts on instead: model-free, its draft nearly free on any CPU.
FREE_DRAFT_METHOD = "pld"


def predicted_draft(draft_choice: dict[str, Any] | None) -> tuple[str, float] | None:
    """(the chosen draft's name, its predicted speedup) from a family's draft choice record
    (`decoders.models.draft_choice.DraftChoice.as_dict`), None where there is none."""
    if not draft_choice:
        return None
    chosen = draft_choice.get("chosen")
    for candidate in draft_choice.get("candidates") or []:
        if isinstance(candidate, dict) and candidate.get("kind") == chosen:
            predicted = candidate.get("predicted")
            if isinstance(predicted, (int, float)):
                return str(candidate.get("source") or chosen), float(predicted)
    return None


def start_method(params: DecodeParams, start: DecodeParams,
                 draft_choice: dict[str, Any] | None) -> tuple[str, str] | None:
    """(method, why) when the first run should not be the default method ``start.method``: the
    parameters are still the start ones (nobody chose a method), the default drafts with a model,
    and the family's chosen draft is predicted to pay less than `START_PAYS` here. None otherwise."""
    if params != start or params.method != "spec" or FREE_DRAFT_METHOD not in METHOD_NAMES:
        return None
    predicted = predicted_draft(draft_choice)
    if predicted is None:
        return None
    source, speedup = predicted
    if speedup >= START_PAYS:
        return None
    why = f"the chosen model draft, {source.split(' (')[0]}, is predicted {speedup:.2f}x here; m: speculative"
    return FREE_DRAFT_METHOD, why
