"""What `Engine.stream` yields besides iteration records, so that a UI can say what is happening."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: How a model load reports progress: a message and, when known, the fraction done.
LoadProgress = Callable[[str, "float | None"], None]


@dataclass(frozen=True)
class PhaseStarted:
    """A phase began: ``phase`` is "baseline" (autoregressive reference) or "method" (a decode of
    ``max_new_tokens`` at most); or "curve", after the method's last token, when the verify-cost
    curve T(k) is measured at a context where it was not yet (``max_new_tokens``: its forwards)."""

    phase: str
    label: str
    max_new_tokens: int
    cached: bool = False  # baseline reused from an earlier run of the same prompt and settings
    prompt_tokens: int = 0  # the prompt the phase prefills first (its first iteration includes that)
    paired: bool = False  # the method phase decodes its baseline too, step by step in alternation


@dataclass(frozen=True)
class Progress:
    """Tokens emitted so far in the current phase (yielded at most once per iteration); in the
    "curve" phase, the forwards done."""

    phase: str
    tokens: int
    total: int
