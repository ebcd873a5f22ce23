"""The rows of an iteration: drafted tokens with their verdict, emitted tokens with their kind,
and top-k entries. Each is saved as a JSON list (``array_like``), the format the project started from."""

from __future__ import annotations

from typing import Annotated

import msgspec

from decoders.records.bounds import MAX_COUNT, Prob, TokenId, TokenText
from decoders.records.codec import Record
from decoders.records.kinds import EmitKind, Status

__all__ = ["CHAIN", "DraftRow", "Emitted", "TopEntry"]

#: A draft row's parent when it is not given: the row before it (a chain). `Iteration` resolves it
#: to the row's index - 1 when built or read; a saved chain row leaves its parent out.
CHAIN = -2


class DraftRow(Record, array_like=True, omit_defaults=True):
    """One drafted token and how verification judged it:
    ``[token, text, q, p, acc_prob, status]``, then the parent where the row does not continue
    the row before it (a tree)."""

    token: TokenId
    text: TokenText
    q: Prob | None  # helper probability of the token (None: no helper model)
    p: Prob | None  # target probability of the token
    acc_prob: Prob | None  # probability that verification accepts it
    status: Status  # acc | rej | unv
    parent: Annotated[int, msgspec.Meta(ge=CHAIN, le=MAX_COUNT)] = CHAIN  # the row this one continues; -1: the sequence


class Emitted(Record, array_like=True):
    """``[token, text, kind]``."""

    token: TokenId
    text: TokenText
    kind: EmitKind


class TopEntry(Record, array_like=True):
    """``[token, text, prob]``."""

    token: TokenId
    text: TokenText
    prob: Prob


