"""What the engine's helper drafts with (`Engine.set_draft`, `Engine.draft_with`): the family's own
helper model, an early exit of the main model, or a draft built from it (int4, a trained head;
`decoders.models.drafts`), each built once and kept, switched between runs while the main model and
the measured baselines stay. A mixin of `decoders.engine.Engine`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from decoders.backends.runner import KVRunner
from decoders.core.errors import DecodeError
from decoders.models.drafts import Draft, DraftCache, DraftTarget, EarlyExit, row_choice, source_of

if TYPE_CHECKING:
    from decoders.backends.hf import Backend
    from decoders.models.family import Family


def early_exit_layer(family: Family) -> int | None:
    """The early-exit layer the family's helper drafts with (None: any other draft, or none)."""
    return family.draft.layer if isinstance(family.draft, EarlyExit) and family.helper is not None else None


def torch_backend(family: Family) -> bool:
    """Whether torch runs the family (llama.cpp has no early exit and no torch modules to draft from)."""
    return family.backend == "torch"


def own_helper_model(family: Family) -> bool:
    """Whether the family's helper is a model of its own (a transformers module, or a GGUF on llama.cpp)."""
    if family.helper_model is not None:
        return True
    return not torch_backend(family) and family.helper is not None


class DraftSwitching:
    """The engine's draft: which it is, and switching to another (the engine sets the fields)."""

    family: Family
    clock: Callable[[], float] | None
    helper: KVRunner | None
    _drafts: DraftCache  # the drafts built from the main model, each once, by the draft as its row names it
    _own_helper: Family | None  # the family with its own helper model, to go back to

    @property
    def has_helper(self) -> bool:
        return self.helper is not None

    @property
    def draft_layers(self) -> int:
        """The main model's layer count when it may draft for itself by early exit (no helper
        model of its own), else 0."""
        if own_helper_model(self.family) or not torch_backend(self.family):
            return 0
        layers = int(self.family.main.n_layers or 0)
        return layers if layers > 1 else 0

    @property
    def draft_layer(self) -> int | None:
        """The early-exit layer the helper drafts with (None: any other draft, or none)."""
        return early_exit_layer(self.family)

    @property
    def draft(self) -> Draft | None:
        """What drafts now, as the draft row names it (None: the family's own helper model, or none)."""
        return row_choice(self.family.draft)

    def set_draft(self, draft: Draft | None) -> None:
        """Draft with ``draft`` from now on (built first if need be: `build_draft`); None: the
        family's own helper model again. The models and the measured baselines stay. Call it
        between runs, never while a run uses the engine."""
        if draft is None:
            own = self._own_helper
            if own is None or self.family.helper is own.helper:
                return
            assert own.helper is not None  # a family with a helper model has its backend
            self._switch(own.draft, own.helper, own.helper_source)
            return
        if isinstance(draft, EarlyExit):
            if not self.draft_layers:
                raise DecodeError(f"{self.family.label} drafts with its own helper model; an early-exit layer "
                                  "applies only to a family without one")
            if not 1 <= draft.layer < self.draft_layers:
                raise DecodeError(f"the draft layer must be in 1..{self.draft_layers - 1}, got {draft.layer}")
        backend = self.build_draft(draft)
        if self.family.helper is not backend:
            self._switch(draft, backend, source_of(draft, backend))

    def _switch(self, draft: Draft | None, backend: Backend, source: str | None) -> None:
        self.family = dataclasses.replace(self.family, helper=backend, helper_source=source, draft=draft)
        self.helper = KVRunner(backend, self.clock)

    def has_draft(self, draft: Draft) -> bool:
        """Whether ``draft`` is built (switching to it then costs nothing)."""
        return draft in self._drafts

    def build_draft(self, draft: Draft):
        """``draft`` of the main model, built by its kind's builder (`decoders.models.drafts`) and
        warmed up once; the main model and the baselines stay. DecodeError says why not (a shape
        the kernel cannot take, too little memory, no head, a llama.cpp family)."""
        return self._drafts.get(draft, DraftTarget.of(self.family))

    def draft_with(self, family: Family) -> None:
        """Draft with ``family``'s helper from now on: a family of the same main model whose helper
        is another draft (the bench's rows). The measured baselines stay.
        Call it between runs, never while a run uses the engine."""
        if family.main is not self.family.main:
            raise ValueError("draft_with takes a family of the same main model")
        if family is self.family:
            return
        self.family = family
        self.helper = KVRunner(family.helper, self.clock) if family.helper is not None else None

    @property
    def helper_model_source(self) -> str | None:
        """Where the family's own helper model came from, when it has one."""
        own = self._own_helper
        return (own.helper_source or "helper model") if own is not None else None
