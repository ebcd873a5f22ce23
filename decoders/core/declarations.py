"""What a decoding method is: its parameters, its record and its figures, declared in one place.

A method is one module under `decoders/methods/` that calls `register(Method(...))` at import.
Everything else reads the declaration: the command line and the bench generate their flags
from the `ParamSpec`s, the app its parameter knobs, `DecodeParams` its fields, defaults and
validation, and the summary its figures. Nothing here imports torch, so the app can list the
methods and their parameters before any model loads.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generator

from decoders.core.errors import DecodeError

if TYPE_CHECKING:
    from decoders.analysis.stats import DecodeStats
    from decoders.core.params import DecodeParams
    from decoders.methods.shared.common import DecodeContext
    from decoders.records.run import Iteration, Run
    from decoders.records.summary import Summary

    MethodGen = Generator[Iteration, None, Run]

KINDS = ("int", "float", "choice", "bool", "rates")
#: The most numbers a "rates" parameter takes (one per draft position).
MAX_RATES = 64


@dataclass(frozen=True)
class ParamSpec:
    """One parameter a person can set: its range, its step, its default and what it means.

    ``low``/``high`` bound numbers (every size a user can type has an upper bound); ``ladder``
    gives the app's steps for a number whose useful values spread over orders of magnitude.
    """

    name: str  # the attribute of DecodeParams, e.g. "gamma"
    label: str  # the app's short label
    help: str  # one sentence: what it does
    default: Any
    kind: str = "int"
    low: float | None = None
    high: float | None = None
    step: float = 1
    choices: tuple[str, ...] = ()
    ladder: tuple[int, ...] | None = None
    ui_range: tuple[float, float] | None = None  # where the app's keys stop, when narrower than low..high
    flag_name: str | None = None  # the flag without "--", when it is not the name with dashes
    metavar: str | None = None
    symbol: str | None = None  # its short name in compact lists ("γ=4"); default the name

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"ParamSpec {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind in ("int", "float", "rates") and (self.low is None or self.high is None):
            raise ValueError(f"ParamSpec {self.name}: a number needs both bounds")
        if self.kind == "choice" and self.default not in self.choices:
            raise ValueError(f"ParamSpec {self.name}: default {self.default!r} is not one of {self.choices}")

    @property
    def flag(self) -> str:
        return "--" + (self.flag_name or self.name.replace("_", "-"))

    def _fmt(self, x: float | None) -> str:
        """A bound or value as the messages show it (only numbers, which have both bounds, get here)."""
        assert x is not None
        return f"{x:g}" if self.kind == "float" else str(int(x))

    def _value(self, x: float) -> str:
        """A value refused, with the digits that make it differ from the bound ("got 100.0001", not
        "got 100" beside "<= 100")."""
        return f"{x:.12g}" if self.kind == "float" else str(int(x))

    def _bounds(self) -> str:
        return f"{self._fmt(self.low)}..{self._fmt(self.high)}"

    def validate(self, value: Any, ui: bool = False) -> Any:
        """``value`` if it is allowed, else a DecodeError that names it, the range and the fix.

        ``ui`` words the fix for the app (the label) instead of the command line (the flag).
        """
        where = f"set {self.label}" if ui else f"set {self.flag}"
        if self.kind == "choice":
            if value not in self.choices:
                raise DecodeError(f"unknown {self.name.replace('_', ' ')} {value!r}; "
                                  f"choose one of {', '.join(self.choices)}")
            return value
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise DecodeError(f"{self.name} must be true or false, got {value!r}")
            return value
        if self.kind == "rates":
            return self._validate_rates(value, where)
        number_ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN
        noun = "an integer" if self.kind == "int" else "a number"
        if not number_ok or (self.kind == "int" and not float(value).is_integer()):
            raise DecodeError(f"{self.name} must be {noun} in {self._bounds()}, got {value!r}; "
                              f"{where} to a value in that range")
        low, high = self._fmt(self.low), self._fmt(self.high)
        if value < self.low:
            raise DecodeError(f"{self.name} must be {noun} >= {low}, got {self._value(value)}; "
                              f"{where} to {low} or more")
        if value > self.high:
            raise DecodeError(f"{self.name} must be {noun} <= {high}, got {self._value(value)}; "
                              f"{where} to {high} or less")
        return int(value) if self.kind == "int" else float(value)

    def _validate_rates(self, value: Any, where: str) -> tuple[float, ...]:
        """A "rates" value: one to `MAX_RATES` numbers, each in low..high (a tuple or a list)."""
        assert self.low is not None and self.high is not None  # rates have both bounds (__post_init__)
        low, high = self._fmt_float(self.low), self._fmt_float(self.high)
        shape = f"1 to {MAX_RATES} numbers in {low}..{high}, comma-separated"
        if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= MAX_RATES:
            raise DecodeError(f"{self.name} must be {shape}, got {value!r}; {where} to e.g. 0.9,0.8,0.7")
        for x in value:
            if not isinstance(x, (int, float)) or isinstance(x, bool) or x != x or not self.low <= x <= self.high:
                shown = f"{x:.12g}" if isinstance(x, float) else repr(x)
                raise DecodeError(f"{self.name} must be {shape}, got {shown}; {where} to rates in {low}..{high}")
        return tuple(float(x) for x in value)

    @staticmethod
    def _fmt_float(x: float | None) -> str:
        assert x is not None  # rates have both bounds
        return f"{x:g}"

    def parse_rates(self, text: str) -> tuple[float, ...]:
        """``"0.9,0.8,0.7"`` as a tuple of floats (argparse's type for a "rates" flag); a word that
        is not a number: argparse's one-line error."""
        try:
            return tuple(float(part) for part in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{self.flag} takes comma-separated numbers such as 0.9,0.8,0.7, "
                                             f"got {text!r}") from None

    def add_argument(self, group: argparse._ActionsContainer) -> None:
        """The command-line flag: type, default, choices and help, from this declaration."""
        kwargs: dict[str, Any] = {"dest": self.name, "default": self.default}
        if self.kind == "bool":
            kwargs.update(action=argparse.BooleanOptionalAction)
        elif self.kind == "choice":
            kwargs.update(choices=self.choices)
        elif self.kind == "rates":
            kwargs.update(type=self.parse_rates, metavar=self.metavar or "A[,A...]")
        else:
            kwargs.update(type=int if self.kind == "int" else float, metavar=self.metavar or self.name.upper())
        bounds = f" ({self._bounds()})" if self.kind in ("int", "float") else ""
        default = self.shown(self.default) if self.kind == "rates" else self.default
        kwargs["help"] = f"{self.help}{bounds}; default {default}"
        group.add_argument(self.flag, **kwargs)

    def step_value(self, value: Any, direction: int) -> Any:
        """The value one step up (``direction`` +1) or down (-1), within range; choices cycle."""
        if self.kind == "choice":
            i = self.choices.index(value) if value in self.choices else 0
            return self.choices[(i + direction) % len(self.choices)]
        if self.kind == "bool":
            return not value
        if self.kind == "rates":  # no steps: typed whole
            return value
        if self.ladder:
            if direction > 0:
                nxt = next((v for v in self.ladder if v > value), self.ladder[-1])
            else:
                nxt = next((v for v in reversed(self.ladder) if v < value), self.ladder[0])
            return nxt
        low, high = self.ui_range or (self.low, self.high)
        moved = value + self.step * direction
        if self.kind == "float":
            moved = round(moved, 6)
        if not low <= moved <= high:  # at the edge: stay (or come back inside from outside)
            moved = min(max(value, low), high)
        return float(moved) if self.kind == "float" else int(moved)

    def shown(self, value: Any) -> str:
        if self.kind == "rates" and isinstance(value, (tuple, list)):
            return ",".join(f"{x:g}" for x in value)
        if self.kind == "float":
            return f"{value:g}"
        return str(value)


@dataclass(frozen=True)
class Figure:
    """A figure a method adds to the summary, kept in ``Summary.extras[key]``."""

    key: str
    label: str
    help: str
    fmt: str = "{:.2f}"

    def shown(self, value: Any) -> str:
        if value is None:
            return "–"
        if isinstance(value, float) and not math.isfinite(value):
            return "n/a"
        try:
            return self.fmt.format(value)
        except (ValueError, TypeError):
            return str(value)


#: The kinds of bench target a method may declare, in the order the report lists them.
BENCH_TARGET_KINDS = ("counterpart", "theorem", "variants_beat_plain", "beats")


@dataclass(frozen=True)
class BenchTarget:
    """A target the bench judges on a method's rows (the bench implements each kind):

    * ``counterpart``: tau and speedup at least its transformers counterpart's on every task
      group, and never slower than autoregressive decoding;
    * ``theorem``: each linear-draft row within 15% of Theorem 3.8's prediction;
    * ``variants_beat_plain``: each declared variant at least the plain row's speedup on every group;
    * ``beats``: faster than method ``other`` on every group.
    """

    kind: str
    text: str = ""  # the target as the report words it (``counterpart`` words its own from the noun)
    other: str = ""  # ``beats``: the method it must beat

    def __post_init__(self) -> None:
        if self.kind not in BENCH_TARGET_KINDS:
            raise ValueError(f"BenchTarget kind must be one of {BENCH_TARGET_KINDS}, got {self.kind!r}")


def _no_options(params: DecodeParams) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Counterpart:
    """transformers' ``generate()`` call the bench measures beside a method: always greedy, with the
    engine's stop tokens (`decoders.bench.reference` makes the call and counts its forwards).

    ``options``: generate()'s keyword arguments for the run's parameters (the report writes the
    call from them). ``assistant_tokens``: for assisted generation, the tokens drafted per
    iteration (a helper model or an early exit of the main model drafts them; a family with
    neither has no counterpart). ``label(params, assistant)`` names the run (``assistant``:
    "helper" or "early exit @ L", None when not assisted).
    """

    label: Callable[[DecodeParams, str | None], str]
    options: Callable[[DecodeParams], dict[str, Any]] = _no_options
    assistant_tokens: Callable[[DecodeParams], int] | None = None


@dataclass(frozen=True)
class LoopCounterpart:
    """llama-cpp-python's own greedy loop the bench measures beside a method on the llama.cpp backend
    (`decoders.bench.llamacpp_reference` makes the call): ``Llama.generate`` at temperature 0 on the
    same GGUF file and prompt ids, with the engine's stop tokens.

    ``prompt_lookup``: where the loop drafts by prompt lookup, the keyword arguments of
    ``llama_cpp.llama_speculative.LlamaPromptLookupDecoding`` for the run's parameters (None: plain
    greedy decoding). ``label(params)`` names the run.
    """

    label: Callable[[DecodeParams], str]
    prompt_lookup: Callable[[DecodeParams], dict[str, int]] | None = None


@dataclass(frozen=True)
class Shape:
    """A bench variant item ``NAME AxB`` that sets two integer parameters at once: ``tree 2x3``
    for a draft tree's width and depth (`decoders.bench.variants`)."""

    name: str  # "tree"
    first: str  # the parameter A sets, e.g. "tree_width"
    second: str  # the parameter B sets, e.g. "tree_depth"
    letters: str = "AxB"  # how messages write it: "WxD"
    meaning: str = ""  # what the letters are: "width x depth"


@dataclass(frozen=True)
class Method:
    """A decoding method: how it runs and everything the tool shows about it."""

    name: str  # short name on the command line: --method NAME
    label: str  # what people call it
    run: Callable[[DecodeContext], MethodGen]
    params: tuple[ParamSpec, ...] = ()
    needs_helper: bool = False  # drafts with the family's helper model
    greedy_only: bool = False
    detail: str | None = None  # the kind of `Iteration.detail` its records carry
    figures: tuple[Figure, ...] = ()
    draft_length: str | None = None  # the parameter the app's [ and ] change
    describe: Callable[[DecodeParams], str] | None = None  # the run's label, e.g. "Speculative (γ=4)"
    check: Callable[[DecodeParams, bool], None] | None = None  # cross-parameter rules (params, ui); raises DecodeError
    extras: Callable[[Run, DecodeStats, DecodeParams, Summary], dict[str, Any]] | None = None
    explain: Callable[[Summary, str], str] | None = None  # why it was faster or slower (summary, verify-cost text)
    noun: str = ""  # how the explanation names it ("prompt lookup"); default the label in lower case
    summary: str = ""  # one line for help screens and `--help`
    aliases: dict[str, str] = field(default_factory=dict)  # short parameter names for the bench sweep
    order: int = 100  # where it sits in lists (the baseline first)
    #: the bench's default rows beside the method as the flags set it: each a set of parameter overrides
    #: (a method with a helper runs them with the best draft the family offers)
    bench_variants: tuple[tuple[tuple[str, Any], ...], ...] = ()
    bench_targets: tuple[BenchTarget, ...] = ()  # what the bench judges it by
    sweep_fixed: Callable[[str], dict[str, Any]] | None = None  # what a sweep of parameter NAME holds fixed
    baseline: bool = False  # the method every speedup is measured against (exactly one declares it)
    default: bool = False  # what runs when no method is named (exactly one declares it)
    counterpart: Counterpart | None = None  # transformers' call the bench measures beside it
    llamacpp_counterpart: LoopCounterpart | None = None  # llama-cpp-python's loop, beside it on llama.cpp
    #: whether a run with these parameters drafts one linear chain: Theorem 3.8 predicts only such a
    #: run, and transformers (which verifies one linear draft) has an exact counterpart only for it
    linear: Callable[[DecodeParams], bool] | None = None
    shapes: tuple[Shape, ...] = ()  # bench variant items that set two parameters at once
    seeded: Callable[[DecodeParams], bool] | None = None  # a greedy run reads the seed (random guesses)

    def swept(self, name: str) -> dict[str, Any]:
        """The parameters a sweep of ``name`` sets beside it (e.g. a fixed draft policy), from the declaration."""
        return self.sweep_fixed(name) if self.sweep_fixed else {}

    def run_label(self, params: DecodeParams) -> str:
        return self.describe(params) if self.describe else self.label

    def drafts_linearly(self, params: DecodeParams) -> bool:
        return self.linear(params) if self.linear else True

    def reads_seed(self, params: DecodeParams) -> bool:
        """Whether ``params``' seed matters: sampling always, a greedy run when the method declares it."""
        return not params.greedy or bool(self.seeded and self.seeded(params))


MODES = ("greedy", "sampling")
#: The app's steps for max new tokens.
TOKEN_LADDER = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096)

COMMON_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("max_new_tokens", "max tokens", "tokens to generate, baseline alike", 64,
              low=1, high=131072, ladder=TOKEN_LADDER, metavar="N"),
    ParamSpec("mode", "mode", "greedy: argmax, output equals the baseline; sampling: exact sampling",
              "greedy", kind="choice", choices=MODES),
    ParamSpec("temperature", "temperature", "sampling temperature (sampling mode)", 1.0, kind="float",
              low=0.0, high=100.0, step=0.1, ui_range=(0.1, 2.0), metavar="T"),
    ParamSpec("seed", "seed", "seeds sampling and random initial guesses", 0, low=0, high=2**31 - 1),
)
#: Switches that are not numbers to choose (set by --raw, and by the bench for timing studies).
SWITCHES: dict[str, bool] = {
    "chat_template": True,  # wrap the prompt in the model's chat template
    "record": True,  # keep probabilities and top-5 per draft position (off for timing studies)
}
#: The lowest temperature sampling accepts: below it, p / T overflows float32 (1e-45 gives inf and
#: NaN probabilities after the baseline has run); greedy mode is what a temperature near 0 means.
MIN_SAMPLING_TEMPERATURE = 0.01


_REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add ``method`` (a module calls this at import). A parameter two methods declare must be
    the same declaration in both, since `DecodeParams` has one field per name."""
    known = {spec.name: spec for spec in COMMON_PARAMS}
    for other in _REGISTRY.values():
        if other.name != method.name:
            known.update({spec.name: spec for spec in other.params})
    for spec in method.params:
        if spec.name in known and known[spec.name] != spec:
            raise ValueError(f"method {method.name!r} declares parameter {spec.name!r} differently from "
                             "another method; share one ParamSpec")
    _REGISTRY[method.name] = method
    return method


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def all_methods() -> tuple[Method, ...]:
    return tuple(sorted(_REGISTRY.values(), key=lambda m: (m.order, m.name)))


def method_names() -> tuple[str, ...]:
    return tuple(m.name for m in all_methods())


def baseline_method() -> Method:
    """The registered method every other is measured against (autoregressive decoding)."""
    try:
        return next(m for m in all_methods() if m.baseline)
    except StopIteration:
        raise DecodeError("no baseline method is registered; import decoders.methods") from None


def default_method() -> Method:
    """The registered method that runs when none is named (speculative decoding)."""
    try:
        return next(m for m in all_methods() if m.default)
    except StopIteration:
        raise DecodeError("no default method is registered; import decoders.methods") from None


def get_method(name: str) -> Method:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DecodeError(f"unknown method {name!r}; choose one of {', '.join(_REGISTRY)}") from None
