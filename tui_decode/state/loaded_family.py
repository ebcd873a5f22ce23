"""The loaded family: an engine on it, and what speculative decoding drafts with (the family's
helper model, an early-exit layer, or a quantized self-draft)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from decoders.models.family import SELF_DRAFT_KINDS
from tui_decode.state.run_summary import short_paths
from tui_decode.state.settings import DraftOptions, Settings, default_draft_layer

if TYPE_CHECKING:
    from decoders.engine import Engine
    from decoders.models.family import Family, FamilySpec

@dataclass
class LoadedFamily:
    """An engine on a loaded family, with what the app needs to know about its helper.

    A family with its own helper model keeps it. A family without one (the bundled SmolLM2-135M)
    drafts with an early exit of its main model, at the layer the parameters pane chooses
    (`Engine.set_draft_layer`: the exit shares the main model's weights, so changing the layer
    costs nothing, and the engine keeps its loaded models and measured baselines). Either may
    instead draft with an int4 copy of the main model (`Engine.set_self_draft`), built once, in a
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
        helper = getattr(self.engine, "helper_model_source", None)
        kinds = SELF_DRAFT_KINDS if getattr(family, "main_model", None) is not None else ()
        kinds = tuple(kind for kind in kinds if kind != "fastest")  # a choice made at load, not a draft
        if getattr(family, "head_source", None) is None:  # a trained head only where one is at hand
            kinds = tuple(kind for kind in kinds if kind != "head")
        options = DraftOptions(layers=self.draft_layers, helper=helper, kinds=kinds)
        return replace(options, can_draft=bool(options.choices()) or self.engine.has_helper)

    def start_layer(self) -> int | None:
        """The draft layer the parameters pane starts from for this family."""
        if not self.draft_layers or getattr(self.engine.family, "self_draft", None):
            return None  # none, or a quantized self-draft that an early-exit layer would replace
        configured = self.spec.self_draft_layer if self.spec is not None else None
        return configured or default_draft_layer(self.draft_layers)

    def start_draft(self) -> dict[str, Any]:
        """The settings' draft fields for this family as loaded (the draft it was loaded with)."""
        return {"draft_layer": self.start_layer(), "self_draft": getattr(self.engine.family, "self_draft", None)}

    def engine_for(self, settings: Settings) -> Engine:
        """The engine, its helper switched to the chosen draft: a self-draft (built here if the
        worker has not built it yet), an early-exit layer, or the family's helper model.

        Called from the decode worker only, never while another run uses the engine.
        """
        layer = settings.draft_layer
        if settings.self_draft:
            self.engine.set_self_draft(settings.self_draft)
        elif self.draft_layers and layer is not None:
            self.engine.set_draft_layer(layer)  # nothing to do when it drafts at that layer already
        elif hasattr(self.engine, "use_helper_model"):
            self.engine.use_helper_model()
        return self.engine


def helper_description(described: dict[str, Any]) -> str:
    """How a family's helper reads in the parameters pane."""
    helper = described.get("helper")
    return short_paths(str(helper)) if helper else "none"  # a head's folder by its name, not its path


#: The self-drafts a load-time choice may pick, as the app names them.
DRAFT_NAMES = {"head": "trained head", "int4": "int4 self-draft"}


def load_choice_brief(family: Family) -> str | None:
    """What the load measured and chose on this machine (`Family.dtype_choice`, `.draft_choice`),
    in a few words for one line: "measured here: float32 weights, trained head drafts (predicted
    1.13x at γ 1)"; None when nothing was chosen at load. The full sentences (each candidate's
    figures) are the family's ``describe()``."""
    parts = []
    dtype = (family.dtype_choice or {}).get("chosen")
    if dtype:
        parts.append(f"{dtype} weights")
    draft = getattr(family, "draft_choice", None) or {}
    chosen = draft.get("chosen")
    if chosen:
        candidate = next((c for c in draft.get("candidates") or () if isinstance(c, dict) and c.get("kind") == chosen),
                         {})
        predicted, gamma = candidate.get("predicted"), candidate.get("gamma")
        figures = (f" (predicted {predicted:.2f}x at γ {gamma})"
                   if isinstance(predicted, (int, float)) and isinstance(gamma, int) else "")
        parts.append(f"{DRAFT_NAMES.get(chosen, str(chosen))} drafts{figures}")
    return "measured here: " + ", ".join(parts) if parts else None
