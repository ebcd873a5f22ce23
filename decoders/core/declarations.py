"""What a decoding method is: its parameters, its record and its figures, declared in one place.

A method is one module under `decoders/methods/` that calls `register(Method(...))` at import.
Everything else reads the declaration: the command line and the bench generate their flags
from the `ParamSpec`s, the app its parameter knobs, `DecodeParams` its fields, defaults and
validation, and the summary its figures. Nothing here imports torch, so the app can list the
methods and their parameters before any model loads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generator

from decoders.core.errors import DecodeError
from decoders.core.param_spec import ParamSpec  # a method's parameters (imported from here by the methods)

if TYPE_CHECKING:
    from decoders.analysis.stats import DecodeStats
    from decoders.core.params import DecodeParams
    from decoders.methods.shared.common import DecodeContext
    from decoders.records.run import Iteration, Run
    from decoders.records.summary import Summary

    MethodGen = Generator[Iteration, None, Run]


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
