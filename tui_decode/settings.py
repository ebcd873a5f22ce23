"""What the next run uses and how the keys change it: the decoding parameters, the early-exit layer
a family without a helper model drafts with, and the parameters pane's rows (knobs).

No Textual here, so the rules are tested without a terminal."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from decoders.methods.jacobi import INIT
from decoders.methods.prompt_lookup import DRAFT_POLICY
from decoders.params import METHOD_NAMES, METHODS, MODES, DecodeParams

DRAFT_POLICIES, INITS = DRAFT_POLICY.choices, INIT.choices

DEFAULT_PROMPT = (
    "Rewrite this sentence in the past tense: The quick brown fox jumps over the lazy dog, "
    "then it runs into the forest and hides."
)
#: The app's starting parameters: short enough that a first run on a CPU takes seconds.
START_PARAMS = DecodeParams(method="spec", max_new_tokens=48)


@dataclass(frozen=True)
class Settings:
    """What the next run uses: the decoding parameters and, for a family without a helper model,
    the early-exit layer that drafts for speculative decoding."""

    params: DecodeParams = START_PARAMS
    draft_layer: int | None = None

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def with_params(self, **changes: Any) -> Settings:
        return self.replace(params=self.params.replace(**changes))


@dataclass(frozen=True)
class Knob:
    """One row of the parameters pane: a value, the methods it matters for, and how to step it."""

    key: str  # a DecodeParams field, or "draft_layer"
    label: str
    hint: str
    methods: tuple[str, ...] = METHODS

    def applies_to(self, method: str) -> bool:
        return method in self.methods

    def value(self, settings: Settings) -> Any:
        if self.key == "draft_layer":
            return settings.draft_layer
        return getattr(settings.params, self.key)

    def shown(self, settings: Settings) -> str:
        value = self.value(settings)
        if self.key == "method":
            return METHOD_NAMES[value]
        if self.key == "temperature":
            return f"{value:g}"
        if self.key == "draft_layer":
            return "none" if value is None else f"early exit @ layer {value}"
        return str(value)

    def step(self, settings: Settings, direction: int, draft_layers: int = 0) -> Settings:
        """The settings with this value moved one step (``direction`` +1 or -1), within its range.

        ``draft_layers`` is the main model's layer count when it may draft for itself (0: not).
        Pairs that only conflict together (n-gram min above max) are left for the engine's check
        to report, so that a person learns the rule rather than meeting a silent clamp.
        """
        value = self.value(settings)
        if self.key in CHOICES:
            options = CHOICES[self.key]
            return settings.with_params(**{self.key: options[(options.index(value) + direction) % len(options)]})
        if self.key == "temperature":
            return settings.with_params(temperature=round(min(max(value + 0.1 * direction, 0.1), 2.0), 2))
        if self.key == "max_new_tokens":
            return settings.with_params(max_new_tokens=next_on_ladder(TOKEN_LADDER, value, direction))
        if self.key == "draft_layer":
            if draft_layers < 2:
                return settings
            layer = default_draft_layer(draft_layers) if value is None else value + direction
            return settings.replace(draft_layer=min(max(layer, 1), draft_layers - 1))
        low, high = RANGES[self.key]
        return settings.with_params(**{self.key: min(max(value + direction, low), high)})


CHOICES: dict[str, tuple[str, ...]] = {"method": METHODS, "mode": MODES, "init": INITS,
                                       "draft_policy": DRAFT_POLICIES}
RANGES: dict[str, tuple[int, int]] = {
    "seed": (0, 2**31 - 1),
    "gamma": (1, 16),
    "num_pred": (1, 32),
    "ngram_max": (1, 8),
    "ngram_min": (1, 8),
    "block": (1, 16),
}
TOKEN_LADDER = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)

KNOBS: tuple[Knob, ...] = (
    Knob("method", "method", "measured against the autoregressive baseline"),
    Knob("mode", "mode", "greedy: argmax, output equals the baseline"),
    Knob("temperature", "temperature", "sampling temperature (sampling mode)"),
    Knob("seed", "seed", "seeds sampling and Jacobi's random init"),
    Knob("max_new_tokens", "max tokens", "tokens to generate, baseline alike"),
    Knob("gamma", "γ draft length", "tokens drafted before each verify", ("spec",)),
    Knob("draft_layer", "draft model", "early exit: the main model's first layers", ("spec",)),
    Knob("num_pred", "k copy length", "at most k tokens copied per match", ("pld",)),
    Knob("ngram_max", "n-gram max", "longest n-gram looked up", ("pld",)),
    Knob("ngram_min", "n-gram min", "shortest n-gram looked up", ("pld",)),
    Knob("draft_policy", "draft policy", "adaptive: cut drafts to what pays; fixed: k", ("pld",)),
    Knob("block", "m block size", "guesses refined together per iteration", ("jacobi",)),
    Knob("init", "init", "new guesses: repeat last token, or random", ("jacobi",)),
)
KNOB_BY_KEY = {knob.key: knob for knob in KNOBS}
#: The knob that [ and ] change for each method: the length of what one iteration drafts.
DRAFT_LENGTH_KNOB = {"spec": "gamma", "pld": "num_pred", "jacobi": "block"}


def next_on_ladder(ladder: tuple[int, ...], value: int, direction: int) -> int:
    """The next ladder value above (or below) ``value``, which need not be on the ladder."""
    if direction > 0:
        return next((v for v in ladder if v > value), ladder[-1])
    return next((v for v in reversed(ladder) if v < value), ladder[0])


def knobs_for(method: str) -> list[Knob]:
    return [knob for knob in KNOBS if knob.applies_to(method)]


def default_draft_layer(n_layers: int) -> int:
    """Two thirds of the way up the stack (layer 20 of SmolLM2-135M's 30): early enough to be
    cheap, late enough that its guesses sometimes agree with the full model."""
    return min(max((2 * n_layers) // 3, 1), n_layers - 1)
