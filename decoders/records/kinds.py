"""The run record's vocabulary: how each emitted token came to be, and how verification judged each
drafted token. Plain strings, as saved runs hold them."""

# How each emitted token came to be.
KIND_ACCEPTED = "acc"  # a draft token the target accepted
KIND_FIXED = "fix"  # the target's own token where a draft was rejected
KIND_BONUS = "bonus"  # the target's extra token after every draft passed
KIND_AR = "ar"  # a plain autoregressive step, no draft
EMIT_KINDS = (KIND_ACCEPTED, KIND_FIXED, KIND_BONUS, KIND_AR)

# Status of a draft row.
STATUS_ACCEPTED = "acc"
STATUS_REJECTED = "rej"
STATUS_UNVERIFIED = "unv"  # after the first rejection: never judged
