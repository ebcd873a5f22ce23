"""What the thread workers (loading a family, building a self-draft, decoding a run) tell the main screen.

Each is a dataclass message posted from the worker thread with `post_message`, which is safe
across threads; the main screen handles them with ``@on(...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from decoders.core.events import PhaseStarted, Progress
from decoders.records.run import Iteration, RunResult

if TYPE_CHECKING:
    from decoders.models.drafts import Draft
    from decoders.models.family import FamilySpec
    from tui_decode.state.loaded_family import LoadedFamily


def failure_message(error: BaseException) -> str:
    """One line for an unexpected failure inside a worker (out of memory above all)."""
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, MemoryError) or "out of memory" in text.lower():
        return (f"out of memory ({text[:160]}); lower max new tokens, shorten the prompt, "
                "or pick a smaller family (f)")
    return f"{type(error).__name__}: {text[:200]}"


class WorkerMessage(Message):
    """A worker's message to the screen that hosts it; nobody above that screen needs it."""

    bubble = False


# -- loading a family ------------------------------------------------------------------------------
@dataclass
class FamilyProgress(WorkerMessage):
    """The loader's latest progress line (throttled like run batches)."""

    text: str
    fraction: float | None


@dataclass
class FamilyLoaded(WorkerMessage):
    """A family loaded; its engine is ready to run."""

    loaded: LoadedFamily


@dataclass
class FamilyFailed(WorkerMessage):
    """A family did not load; the one loaded before stays in use."""

    spec: FamilySpec
    error: str


# -- building a self-draft ------------------------------------------------------------------------
@dataclass
class DraftBuilt(WorkerMessage):
    """A quantized self-draft of the loaded main model is built and ready to draft."""

    loaded: LoadedFamily
    draft: Draft
    nbytes: int  # what it holds beside the main model
    seconds: float


@dataclass
class DraftFailed(WorkerMessage):
    """A quantized self-draft could not be built; the loaded models and their draft stay."""

    loaded: LoadedFamily
    draft: Draft
    error: str


# -- decoding a run --------------------------------------------------------------------------------
@dataclass
class RunPhase(WorkerMessage):
    """The run moved to its baseline or its method phase."""

    phase: PhaseStarted


@dataclass
class RunBatch(WorkerMessage):
    """Iterations and progress gathered over one batch interval, in order."""

    events: list[Iteration | Progress]


@dataclass
class RunFinished(WorkerMessage):
    """The run's result: complete, or partial after a cancel in the method phase; with why the
    suffix memory's file could not be written after it (`Engine.memory_error`), if it could not."""

    result: RunResult
    memory_error: str | None = None


@dataclass
class RunStopped(WorkerMessage):
    """Cancelled before the method phase: there is no partial run to show."""


@dataclass
class RunFailed(WorkerMessage):
    """The engine refused the input or failed; the message is one line."""

    error: str
