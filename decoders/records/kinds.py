"""The run record's vocabulary: how each emitted token came to be, and how verification judged each
drafted token. Plain strings, as saved runs hold them; `EmitKind` and `Status` are their types
(msgspec refuses any other value in a saved run)."""

from typing import Final, Literal, get_args

EmitKind = Literal["acc", "fix", "bonus", "ar"]
Status = Literal["acc", "rej", "unv"]

# How each emitted token came to be.
KIND_ACCEPTED: Final[EmitKind] = "acc"  # a draft token the target accepted
KIND_FIXED: Final[EmitKind] = "fix"  # the target's own token where a draft was rejected
KIND_BONUS: Final[EmitKind] = "bonus"  # the target's extra token after every draft passed
KIND_AR: Final[EmitKind] = "ar"  # a plain autoregressive step, no draft
EMIT_KINDS: tuple[EmitKind, ...] = (KIND_ACCEPTED, KIND_FIXED, KIND_BONUS, KIND_AR)

# Status of a draft row.
STATUS_ACCEPTED: Final[Status] = "acc"
STATUS_REJECTED: Final[Status] = "rej"
STATUS_UNVERIFIED: Final[Status] = "unv"  # after the first rejection: never judged

assert get_args(EmitKind) == EMIT_KINDS and get_args(Status) == (STATUS_ACCEPTED, STATUS_REJECTED, STATUS_UNVERIFIED)
