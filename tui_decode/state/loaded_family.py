"""The loaded family: an engine on it, and what speculative decoding drafts with (the family's
helper model, an early-exit layer, or a quantized self-draft)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from decoders.models.drafts import DRAFT_KINDS, DraftTarget, EarlyExit, kind_of, row_choice
from tui_decode.state.run_summary import short_paths
from tui_decode.state.settings import DraftOptions, Settings, default_draft_layer

if TYPE_CHECKING:
    from decoders.engine import Engine
    from decoders.models.family import Family, FamilySpec
    from decoders.records.family_info import FamilyInfo

@dataclass
class LoadedFamily:
    """An engine on a loaded family, with what the app needs to know about its helper.

    A family with its own helper model keeps it. A family without one (the bundled SmolLM2-135M)
    drafts with an early exit of its main model, at the layer the parameters pane chooses
    (`Engine.set_draft`: an early exit shares the main model's weights, so changing the layer
    costs nothing, and the engine keeps its loaded models and measured baselines). Either may
    instead draft with an int4 copy of the main model or any other declared kind, built once, in a
    worker (`tui_decode.workers.draft`), when the draft row first lands on it.
    """

    engine: Engine
    spec: FamilySpec | None = None
    threads: int | None = None  # torch threads the runs use (None: not known)

    @classmethod
    def wrap(cls, engine: Engine, spec: FamilySpec | None = None, threads: int | None = None) -> LoadedFamily:
        return cls(engine=engine, spec=spec, threads=threads)

    @property
    def label(self) -> str:
        return self.engine.family.label

    @property
    def draft_layers(self) -> int:
        """The main model's layer count when it may draft for itself, else 0."""
        return self.engine.draft_layers

    def draft_options(self) -> DraftOptions:
        """What the draft row steps through: the helper model, the early-exit layers, int4."""
        family = self.engine.family
        helper = self.engine.helper_model_source
        target = DraftTarget.of(family)
        kinds = () if family.main_model is None or family.backend != "torch" else tuple(
            name for name, kind in DRAFT_KINDS.items() if name != "early-exit" and kind.offers(target))
        options = DraftOptions(layers=self.draft_layers, helper=helper, kinds=kinds)
        return replace(options, can_draft=bool(options.choices()) or self.engine.has_helper)

    def start_layer(self) -> int | None:
        """The draft layer the parameters pane starts from for this family."""
        loaded = row_choice(self.engine.family.draft)
        if not self.draft_layers or (loaded is not None and not isinstance(loaded, EarlyExit)):
            return None  # none, or a self-draft that an early-exit layer would replace
        configured = self.spec.self_draft_layer if self.spec is not None else None
        return configured or default_draft_layer(self.draft_layers)

    def start_draft(self) -> dict[str, Any]:
        """The settings' draft for this family as loaded (the draft it was loaded with)."""
        loaded = row_choice(self.engine.family.draft)
        if loaded is not None and not isinstance(loaded, EarlyExit):
            return {"draft": loaded}
        layer = self.start_layer()
        return {"draft": EarlyExit(layer=layer) if layer is not None else None}

    def engine_for(self, settings: Settings) -> Engine:
        """The engine, its helper switched to the chosen draft (`Engine.set_draft`: built here if
        the worker has not built it yet; None: the family's helper model).

        Called from the decode worker only, never while another run uses the engine.
        """
        draft = settings.draft
        if isinstance(draft, EarlyExit) and not self.draft_layers:
            draft = None
        self.engine.set_draft(draft)
        return self.engine


def helper_description(described: FamilyInfo) -> str:
    """How a family's helper reads in the parameters pane."""
    helper = described.helper
    return short_paths(str(helper)) if helper else "none"  # a head's folder by its name, not its path


def load_choice_brief(family: Family) -> str | None:
    """What the load measured and chose on this machine (`Family.dtype_choice`, `.draft_choice`),
    in a few words for one line: "measured here: float32 weights, trained head drafts (predicted
    1.13x at γ 1)"; None when nothing was chosen at load. The full sentences (each candidate's
    figures) are the family's ``describe()``."""
    parts = []
    dtype = (family.dtype_choice or {}).get("chosen")
    if dtype:
        parts.append(f"{dtype} weights")
    draft = family.draft_choice or {}
    chosen = draft.get("chosen")
    if chosen:
        candidate = next((c for c in draft.get("candidates") or () if isinstance(c, dict) and c.get("kind") == chosen),
                         {})
        predicted, gamma = candidate.get("predicted"), candidate.get("gamma")
        figures = (f" (predicted {predicted:.2f}x at γ {gamma})"
                   if isinstance(predicted, (int, float)) and isinstance(gamma, int) else "")
        name = kind_of(chosen).default().view() if chosen in DRAFT_KINDS else str(chosen)
        parts.append(f"{name} drafts{figures}")
    return "measured here: " + ", ".join(parts) if parts else None
