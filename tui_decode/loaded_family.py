"""The loaded family: an engine on it, and which helper speculative decoding drafts with."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tui_decode.settings import Settings, default_draft_layer

if TYPE_CHECKING:
    from decoders.engine import Engine
    from decoders.family import FamilySpec


@dataclass
class LoadedFamily:
    """An engine on a loaded family, and the helper speculative decoding drafts with.

    A family with its own helper model keeps it. A family without one (the bundled SmolLM2-135M)
    drafts with an early exit of its main model, at the layer the parameters pane chooses; the
    exit shares the main model's weights, so changing the layer costs nothing, and the engine
    (its loaded models and measured baselines) is kept.
    """

    engine: Engine
    spec: FamilySpec | None = None
    draft_layers: int = 0  # main model layers when it may draft for itself, else 0
    applied_layer: int | None = None
    threads: int | None = None  # torch threads the runs use (None: not known)
    _exits: dict[int, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def wrap(cls, engine: Engine, spec: FamilySpec | None = None, threads: int | None = None) -> LoadedFamily:
        family = engine.family
        has_helper_model = getattr(family, "helper_model", None) is not None or (
            spec is not None and bool(spec.helper))
        layers = 0 if has_helper_model else int(getattr(family.main, "n_layers", 0) or 0)
        applied = spec.self_draft_layer if spec is not None else None
        return cls(engine=engine, spec=spec, draft_layers=layers if layers > 1 else 0, applied_layer=applied,
                   threads=threads)

    @property
    def label(self) -> str:
        return self.engine.family.label

    def start_layer(self) -> int | None:
        """The draft layer the parameters pane starts from for this family."""
        if not self.draft_layers:
            return None
        return self.applied_layer or default_draft_layer(self.draft_layers)

    def engine_for(self, settings: Settings) -> Engine:
        """The engine, its helper switched to the chosen early-exit layer when that applies.

        Called from the decode worker only, never while another run uses the engine.
        """
        layer = settings.draft_layer
        if not self.draft_layers or layer is None or layer == self.applied_layer:
            return self.engine
        from decoders.runner import KVRunner

        engine = self.engine
        backend = self._exits.get(layer)
        if backend is None:
            backend = self._exits[layer] = engine.family.main.early_exit(layer)
        engine.family = dataclasses.replace(engine.family, helper=backend,
                                            helper_source=f"early exit @ layer {layer}")
        engine.helper = KVRunner(backend, engine.clock)
        self.applied_layer = layer
        return engine


def helper_description(described: dict[str, Any]) -> str:
    """How a family's helper reads in the parameters pane."""
    helper = described.get("helper")
    return str(helper) if helper else "none"
