"""What the next run uses and how the keys change it: the decoding parameters, what drafts for
speculative decoding (the family's helper model, an early-exit layer, a quantized self-draft),
and the parameters pane's rows (knobs).

A knob is a declared parameter (`decoders.core.declarations.ParamSpec`): its label, help, step and
display come from the declaration, so a method's new parameter shows up here with no change.
Two rows are the app's own: the method itself and, for a method that drafts with a helper, the
early-exit layer. No Textual here, so the rules are tested without a terminal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Iterator

from decoders.core.declarations import COMMON_PARAMS, ParamSpec, get_method, method_names
from decoders.core.params import METHOD_NAMES, DecodeParams, all_param_specs
from decoders.models.drafts import Draft, EarlyExit, kind_of
from decoders.models.family import default_draft_layer  # noqa: F401 (re-exported: loaded_family, tests)

DEFAULT_PROMPT = (
    "Rewrite this sentence in the past tense: The quick brown fox jumps over the lazy dog, "
    "then it runs into the forest and hides."
)
#: The app's starting parameters: short enough that a first run on a CPU takes seconds.
START_PARAMS = DecodeParams(max_new_tokens=48)  # the registry's default method
#: The common parameters in the order the pane lists them, under the method.
COMMON_ORDER = ("mode", "temperature", "seed", "max_new_tokens")
METHOD_KEY = "method"
DRAFT_LAYER_KEY = "draft_layer"


@dataclass(frozen=True)
class Settings:
    """What the next run uses: the decoding parameters and what drafts for speculative decoding
    (`decoders.models.drafts`): an early-exit layer, a draft built from the main model (int4, a
    trained head, ...), or None: the family's own helper model."""

    params: DecodeParams = START_PARAMS
    draft: Draft | None = None

    @property
    def draft_layer(self) -> int | None:
        """The early-exit layer that drafts (None: another draft)."""
        return self.draft.layer if isinstance(self.draft, EarlyExit) else None

    @property
    def self_draft(self) -> str | None:
        """The kind of a draft built from the main model other than an early exit ("int4", "head")."""
        return self.draft.kind if self.draft is not None and not isinstance(self.draft, EarlyExit) else None

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def with_params(self, **changes: Any) -> Settings:
        return self.replace(params=self.params.replace(**changes))


@dataclass(frozen=True)
class DraftOptions:
    """What may draft for the loaded family, in the order the draft row steps through them: its
    own helper model, the early-exit layers 1..layers-1, the quantized self-drafts."""

    layers: int = 0  # the main model's layer count when it may draft by early exit, else 0
    helper: str | None = None  # the family's own helper model, when it has one
    kinds: tuple[str, ...] = ()  # self-drafts it may build ("int4", "head": a trained head)
    #: Whether anything can draft at all (False: a llama.cpp family without a GGUF helper, where a
    #: method that drafts with a helper cannot run); True while no family is loaded (not known).
    can_draft: bool = True

    def choices(self) -> list[Draft | None]:
        """None (the family's helper model), the early-exit layers, then each kind with its defaults."""
        return ([None] if self.helper else []) + [EarlyExit(layer=n) for n in range(1, self.layers)] + \
            [kind_of(kind).default() for kind in self.kinds]

    def current(self, settings: Settings) -> Draft | None:
        if isinstance(settings.draft, EarlyExit) and not self.layers:
            return None
        return settings.draft

    def step(self, settings: Settings, direction: int) -> Settings:
        """The next choice in ``direction`` (+1, -1), stopping at either end."""
        choices = self.choices()
        if len(choices) < 2:
            return settings
        now = self.current(settings)
        if now not in choices or (now is None and not self.helper):  # nothing chosen yet: the default layer
            layer = default_draft_layer(self.layers) if self.layers >= 2 else None
            index = choices.index(EarlyExit(layer=layer)) if layer else 0
        else:
            index = min(max(choices.index(now) + direction, 0), len(choices) - 1)
        return settings.replace(draft=choices[index])


def runnable_methods(options: DraftOptions | None = None) -> Sequence[str]:
    """The methods the loaded family can run: all of them, but for those that draft with a helper
    where nothing can draft (``options.can_draft`` False)."""
    names = method_names()
    if options is None or options.can_draft:
        return names
    return [name for name in names if not get_method(name).needs_helper]


def draft_error(settings: Settings, options: DraftOptions, family: str) -> str | None:
    """Why ``settings``' method cannot run on the loaded family (it drafts with a helper, and
    nothing can draft there), in the app's terms; None when it can."""
    method = settings.params.method_def
    if options.can_draft or not method.needs_helper:
        return None
    others = ", ".join(METHOD_NAMES[name] for name in runnable_methods(options) if name != "ar")
    return (f"{family} has no draft model, so {method.label.lower()} decoding cannot run on it; pick a method "
            f"that drafts with nothing ({others}: m changes the method) or another family (f)")


def input_error(prompt: str, settings: Settings) -> str | None:
    """What is wrong with running ``settings`` on ``prompt`` (an empty prompt, a character that is
    not text, a parameter out of bounds), in one line; None when it can run."""
    from decoders.core.errors import DecodeError
    from decoders.records.inputs import check_text

    try:
        if not prompt.strip():
            raise DecodeError("the prompt is empty; type a prompt in the Prompt pane (e edits it)")
        check_text(prompt, "the prompt", "retype that character in the Prompt pane (e edits it)")
        settings.params.validated(ui=True)
    except DecodeError as error:
        return str(error)
    return None


def draft_options(value: int | DraftOptions) -> DraftOptions:
    """Draft options from a plain layer count (early exit only) or as given."""
    return value if isinstance(value, DraftOptions) else DraftOptions(layers=int(value or 0))


@dataclass(frozen=True)
class Knob:
    """One row of the parameters pane: a declared parameter, or one of the app's two own rows
    (``spec`` None: the method, or the early-exit layer)."""

    key: str  # a DecodeParams name, or "draft_layer"
    label: str
    hint: str
    spec: ParamSpec | None = None

    def value(self, settings: Settings) -> Any:
        if self.key == DRAFT_LAYER_KEY:
            return settings.draft_layer
        return getattr(settings.params, self.key)

    def shown(self, settings: Settings) -> str:
        value = self.value(settings)
        if self.key == METHOD_KEY:
            return METHOD_NAMES.get(value, value)
        if self.key == DRAFT_LAYER_KEY:
            return settings.draft.view() if settings.draft is not None else "none"
        return self.spec.shown(value) if self.spec is not None else str(value)

    def step(self, settings: Settings, direction: int, draft_layers: int | DraftOptions = 0) -> Settings:
        """The settings with this value moved one step (``direction`` +1 or -1), within its range.

        ``draft_layers`` is what may draft (`DraftOptions`), or the main model's layer count when
        it may draft for itself by early exit (0: not).
        Pairs that only conflict together (n-gram min above max) are left for the parameters'
        check to report, so that a person learns the rule rather than meeting a silent clamp.
        """
        value = self.value(settings)
        if self.key == METHOD_KEY:  # the methods the family can run (with a known draft, all of them)
            names = runnable_methods(draft_layers if isinstance(draft_layers, DraftOptions) else None)
            index = names.index(value) if value in names else -direction
            return settings.with_params(method=names[(index + direction) % len(names)])
        if self.key == DRAFT_LAYER_KEY:
            return draft_options(draft_layers).step(settings, direction)
        assert self.spec is not None  # every knob but the method's and the draft layer's has its parameter's spec
        return settings.with_params(**{self.key: self.spec.step_value(value, direction)})


METHOD_KNOB = Knob(METHOD_KEY, "method", "measured against the autoregressive baseline")
DRAFT_LAYER_KNOB = Knob(DRAFT_LAYER_KEY, "draft model",
                        "the main model's first layers (early exit), its int4 copy or a trained head")


def spec_knob(spec: ParamSpec, method_label: str = "") -> Knob:
    """The row for a declared parameter; its help loses a leading "<method>: " (the pane shows
    one method's rows only)."""
    hint = spec.help
    prefix = f"{method_label.lower()}: "
    if method_label and hint.lower().startswith(prefix):
        hint = hint[len(prefix):]
    return Knob(spec.name, spec.label, hint, spec)


def knobs_for(method: str) -> list[Knob]:
    """The rows the pane shows for ``method``: the method, the common parameters, its own
    parameters and, when it drafts with a helper, the early-exit layer."""
    common = {spec.name: spec for spec in COMMON_PARAMS}
    rows = [METHOD_KNOB] + [spec_knob(common[name]) for name in COMMON_ORDER]
    definition = get_method(method)
    rows += [spec_knob(spec, definition.label) for spec in definition.params]
    if definition.needs_helper:
        rows.append(DRAFT_LAYER_KNOB)
    return rows


def draft_length_key(method: str) -> str | None:
    """The parameter [ and ] change for ``method``: the length of what one iteration drafts."""
    return get_method(method).draft_length


class _KnobsByKey(Mapping[str, Knob]):
    """Every knob by key, read when asked for (a method registered later is included)."""

    def _all(self) -> dict[str, Knob]:
        knobs = {METHOD_KEY: METHOD_KNOB, DRAFT_LAYER_KEY: DRAFT_LAYER_KNOB}
        for name, spec in all_param_specs().items():
            knobs[name] = spec_knob(spec)
        return knobs

    def __getitem__(self, key: str) -> Knob:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


KNOB_BY_KEY: Mapping[str, Knob] = _KnobsByKey()
