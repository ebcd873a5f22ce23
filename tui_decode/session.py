"""The app's state and rules that need no Textual: the settings a person edits with keys and how
each key changes them, where runs are saved, how worker updates are batched, and which helper a
loaded family drafts with.

Kept apart from the widgets so that the rules are tested without a terminal and so that importing
this module (and so the app) never imports torch: the first frame paints before any model loads.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from decoders.methods.jacobi import INIT
from decoders.methods.prompt_lookup import DRAFT_POLICY
from decoders.params import METHOD_NAMES, METHODS, MODES, DecodeParams

DRAFT_POLICIES, INITS = DRAFT_POLICY.choices, INIT.choices
from decoders.records import Iteration, Run, RunResult

if TYPE_CHECKING:
    from decoders.engine import Engine
    from decoders.family import FamilySpec

DEFAULT_PROMPT = (
    "Rewrite this sentence in the past tense: The quick brown fox jumps over the lazy dog, "
    "then it runs into the forest and hides."
)
RUNS_DIR_ENV = "TUI_DECODE_RUNS_DIR"
#: Worker updates reach the UI at most this often (seconds): smooth to watch, cheap to draw.
BATCH_INTERVAL = 0.04
#: The app's starting parameters: short enough that a first run on a CPU takes seconds.
START_PARAMS = DecodeParams(method="spec", max_new_tokens=48)


def runs_dir() -> Path:
    """Where ctrl+s saves runs: $TUI_DECODE_RUNS_DIR, else the user data dir's ``runs`` folder."""
    override = os.environ.get(RUNS_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("tui-decode")) / "runs"


def run_file_stem(result: RunResult, folder: Path, now: float | None = None) -> str:
    """A file name (no suffix) that sorts by time, says which method it holds and is not taken
    in ``folder`` (two saves in one second get -2, -3, ...)."""
    stem = f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}-{result.method.method}"
    candidate, n = stem, 1
    while (folder / f"{candidate}.json").exists():
        n += 1
        candidate = f"{stem}-{n}"
    return candidate


def saved_runs(folder: Path) -> list[Path]:
    """Saved run files in ``folder``, newest first."""
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)


def real_text(shown: str) -> str:
    """The text a token stands for, from its display form (`decoders.family.visible_text`).

    Records keep the display form only, so the token stream turns the markers back: "↵" is a
    newline and a token made only of "·" (and newlines) was whitespace. Other markers (tab "→",
    "<0x..>" bytes) stay visible; they are rare, and a real "→" in the text is not altered.
    """
    if "·" in shown and set(shown) <= {"·", "↵"}:
        shown = shown.replace("·", " ")
    return shown.replace("↵", "\n")


# -- settings and the keys that change them -----------------------------------------------------


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


# -- batching worker updates ----------------------------------------------------------------------


class Batcher:
    """Collects a worker's events and hands them over in lists, at most every ``interval`` seconds.

    One message per batch keeps the UI's queue short however fast the model runs; the check is
    made as events arrive, so an event waits at most one model step before it is shown.
    """

    def __init__(self, deliver: Callable[[list], None], interval: float = BATCH_INTERVAL,
                 clock: Callable[[], float] = time.monotonic):
        self.deliver = deliver
        self.interval = interval
        self.clock = clock
        self.items: list = []
        self.last = clock()

    def add(self, item: Any) -> None:
        self.items.append(item)
        if self.clock() - self.last >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self.items:
            items, self.items = self.items, []
            self.deliver(items)
        self.last = self.clock()


# -- the loaded family and its helper -------------------------------------------------------------


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
            spec is not None and bool(spec.helper)) or bool(getattr(family, "self_draft", None))
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


# -- partial statistics while a run streams --------------------------------------------------------


def live_figures(iterations: list[Iteration]) -> dict[str, Any]:
    """What can be said about a run while it is still going: tokens, iterations, acceptance."""
    tokens = sum(len(it.emit) for it in iterations)
    drafted = sum(len(it.draft) for it in iterations)
    accepted = sum(1 for it in iterations for e in it.emit if e.kind == "acc")  # as `summarize` counts
    judged = sum(min(it.n_accepted + 1, len(it.draft)) for it in iterations)
    return {
        "tokens": tokens,
        "iterations": len(iterations),
        "tau": round(tokens / len(iterations), 3) if iterations else None,
        "drafted": drafted,
        "accepted": accepted,
        "accept_rate": round(accepted / judged, 3) if judged else None,
    }


def run_tokens(run: Run) -> list[tuple[str, str, int]]:
    """(real text, kind, iteration) of each emitted token, from the run's iterations."""
    return [(real_text(e.text), e.kind, it.k) for it in run.iters for e in it.emit]
