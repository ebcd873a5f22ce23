"""One parameter swept over integer values: measured speedup against Theorem 3.8's prediction."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal, Sequence

import msgspec

from decoders.analysis.theory import cost_aware_speedup, predicted_speedup
from decoders.bench.aggregate import SideStats
from decoders.bench.common import known, mean, off_by, rounded
from decoders.bench.entries import OursEntry
from decoders.bench.inputs import ProgressFn, base_params, created, head, prepare, prompt_records, shortest
from decoders.bench.machine import MachineInfo, family_info, machine_info
from decoders.bench.measure import bench_engine, pairing_note, pairing_of
from decoders.bench.prompts import BenchPrompt, PromptRecord
from decoders.bench.settings import SweepSettings
from decoders.bench.suite import REPORT_SCHEMA
from decoders.core.declarations import all_methods, get_method
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.records.codec import Record
from decoders.records.family_info import FamilyInfo

if TYPE_CHECKING:
    from decoders.models.family import Family

MAX_SWEEP_VALUES = 32


def sweepable() -> dict[str, tuple[str, str]]:
    """Every integer parameter a registered method declares, by its name and by the method's
    short aliases (k, m) -> (method, parameter)."""
    names: dict[str, tuple[str, str]] = {}
    for method in all_methods():
        ints = [spec.name for spec in method.params if spec.kind == "int"]
        for name in ints:
            names.setdefault(name, (method.name, name))
        for alias, name in method.aliases.items():
            if name in ints:
                names.setdefault(alias, (method.name, name))
    return names


def __getattr__(name: str) -> Any:
    """``SWEEPABLE``: `sweepable()` read when asked for, so a method registered later is in it."""
    if name == "SWEEPABLE":
        return sweepable()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def sweep_names() -> str:
    """The sweepable parameters for messages: "gamma, num_pred (k), block (m)"."""
    aliases: dict[str, list[str]] = {}
    for name, (_, param) in sweepable().items():
        aliases.setdefault(param, [])
        if name != param:
            aliases[param].append(name)
    return ", ".join(param + (f" ({', '.join(short)})" if short else "") for param, short in aliases.items())


def axis_name(param: str) -> str:
    """A swept parameter as the app's sweep screen names it: its label's first word (k for
    num_pred, γ for gamma, m for block); the name itself for one no method declares."""
    from decoders.core.params import all_param_specs

    spec = all_param_specs().get(param)
    return spec.label.split()[0] if spec is not None and spec.label.strip() else param


class Sweep(Record):
    """One parameter swept over integer values, e.g. ``gamma=1..8``."""

    name: str  # the DecodeParams field
    method: str
    values: tuple[int, ...]

    @property
    def spec(self) -> str:
        return f"{self.name}={','.join(map(str, self.values))}"

    @property
    def axis(self) -> str:
        """The parameter as the app's sweep screen names it (k, γ, m)."""
        return axis_name(self.name)

    def heading(self) -> str:
        """What the sweep is, in the app's sweep screen's words: "k (num_pred) · Prompt lookup ·
        draft policy fixed" (the policy said where the sweep fixes it, as every run of it did)."""
        method = get_method(self.method) if self.method in {m.name for m in all_methods()} else None
        name = self.axis if self.axis == self.name else f"{self.axis} ({self.name})"
        label = method.label if method is not None else self.method
        fixed = method is not None and method.swept(self.name).get("draft_policy") == "fixed"
        return f"{name} · {label}" + (" · draft policy fixed" if fixed else "")


def _shown(text: str, most: int = 60) -> str:
    """``text`` quoted for a message, cut short if long (an error line must not echo 200 kB)."""
    return repr(text) if len(text) <= most else repr(text[:most]) + f"... ({len(text)} characters)"


def parse_sweep(text: str) -> Sweep:
    """``NAME=A..B`` or ``NAME=a,b,c`` with NAME an integer parameter of a registered method
    (gamma, num_pred or k, block or m, ...), the values within its declared bounds."""
    names = sweepable()
    example = next(iter(names), "NAME")  # the first method's first integer parameter
    hint = f"write --sweep NAME=A..B or NAME=a,b,c with NAME one of {sweep_names()}, e.g. {example}=1..8"
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not values.strip():
        raise DecodeError(f"bad sweep {_shown(text)}; {hint}")
    if name not in names:
        raise DecodeError(f"cannot sweep {_shown(name)}; {hint}")
    method, param = names[name]
    spec = next(spec for spec in get_method(method).params if spec.name == param)
    assert spec.low is not None and spec.high is not None  # an integer parameter is bounded
    try:
        if ".." in values:
            low, high = (int(v) for v in values.split("..", 1))
            if low > high:
                first, last = (_shown(str(v), 20)[1:-1] for v in (low, high))
                raise DecodeError(f"bad sweep {_shown(text)}: {first} > {last}; {hint}")
            if high - low + 1 > MAX_SWEEP_VALUES:  # counted, not built: 1..10**20 is no list to make
                count = high - low + 1
                raise DecodeError(f"bad sweep {_shown(text)}: {count if count < 10 ** 12 else 'over 10^12'} values, "
                                  f"at most {MAX_SWEEP_VALUES}; {hint}")
            numbers = list(range(low, high + 1))
        else:
            numbers = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise DecodeError(f"bad sweep {_shown(text)}: the values must be integers; {hint}") from None
    if not numbers or min(numbers) < spec.low:
        raise DecodeError(f"bad sweep {_shown(text)}: the values must be integers >= {spec.low:g}; {hint}")
    if len(numbers) > MAX_SWEEP_VALUES:
        raise DecodeError(f"bad sweep {_shown(text)}: {len(numbers)} values, at most {MAX_SWEEP_VALUES}; {hint}")
    if max(numbers) > spec.high:
        raise DecodeError(f"bad sweep {_shown(text)}: the values must be integers <= {spec.high:g} ({param}'s bound); "
                          f"{hint}")
    return Sweep(param, method, tuple(dict.fromkeys(numbers)))


def sweep_prediction(entry: OursEntry, draft_length: int | None) -> tuple[float | None, float | None]:
    """Theorem 3.8 (and its cost-aware form) for one run that drafts ``draft_length`` tokens.

    A method that predicts its own speedup (speculative decoding, from its alpha_hat and c_hat)
    keeps its prediction. Others draft at no model cost (c = 0) with their acceptance rate as
    alpha; the theorem assumes ``draft_length`` drafts every iteration, which prompt lookup does
    only when its n-gram matches. No draft length (a method without one): no prediction.
    """
    theorem, drafting = entry.theorem, entry.drafting
    if theorem is not None:
        return theorem.predicted_speedup, theorem.predicted_speedup_cost_aware
    alpha = drafting.accept_rate if drafting else None
    if alpha is None or draft_length is None:
        return None, None
    cost = drafting.verify_cost if drafting else None
    return (predicted_speedup(alpha, draft_length, 0.0),
            cost_aware_speedup(alpha, draft_length, 0.0, cost) if cost else None)


class SweepSample(OursEntry, kw_only=True):
    """One run at one value on one prompt (its entry's fields), with the theorem's prediction for it."""

    predicted: float | None
    predicted_cost_aware: float | None
    question_id: Any
    group: str
    repeat: int


class SweepRow(Record, kw_only=True):
    """The pooled figures at one value of the swept parameter (a figure a report leaves out reads as None)."""

    value: int
    measured_speedup: float | None = None
    predicted_speedup: float | None = None
    error: float | None = None
    predicted_cost_aware: float | None = None
    error_cost_aware: float | None = None
    tau: float | None = None
    acceptance: float | None = None
    mean_acceptance_length: float | None = None
    per_position_acceptance: list[float] | None = None
    alpha_hat: float | None = None
    c_hat: float | None = None
    identical: int | None = None
    n: int
    ms_per_token: float | None = None

    @classmethod
    def of(cls, value: int, samples: Sequence[SweepSample], ar: Sequence[OursEntry]) -> SweepRow:
        stats = SideStats.of(samples, ar)
        predicted = mean(s.predicted for s in samples)
        aware = mean(s.predicted_cost_aware for s in samples)
        return cls(value=value, measured_speedup=stats.speedup, predicted_speedup=rounded(predicted),
                   error=off_by(stats.speedup, predicted), predicted_cost_aware=rounded(aware),
                   error_cost_aware=off_by(stats.speedup, aware), tau=stats.tau, acceptance=known(stats.acceptance),
                   mean_acceptance_length=known(stats.mean_acceptance_length),
                   per_position_acceptance=known(stats.per_position_acceptance),
                   alpha_hat=known(stats.alpha_hat), c_hat=known(stats.c_hat), identical=stats.identical, n=stats.n,
                   ms_per_token=stats.ms_per_token)


class SweepReport(Record, kw_only=True):
    """A whole sweep as its report.json holds it (schema ``REPORT_SCHEMA``, kind "sweep");
    ``best_value`` is worked out from the rows."""

    schema: int = REPORT_SCHEMA
    kind: Literal["sweep"] = "sweep"
    created: str = msgspec.field(default_factory=created)
    family: FamilyInfo
    machine: MachineInfo
    sweep: Sweep
    settings: SweepSettings
    prompts: list[PromptRecord]
    ar_ms_per_token: float | None
    rows: list[SweepRow]
    best_value: int = 0
    samples: dict[int, list[SweepSample]]  # per value
    notes: list[str]
    elapsed_s: float = 0.0

    def __post_init__(self) -> None:
        if self.rows:
            self.best_value = max(self.rows, key=lambda row: row.measured_speedup or 0).value
        for per in self.samples.values():  # a report that does not name an entry's method: the sweep's
            for sample in per:
                sample.method = sample.method or self.sweep.method


def run_sweep(family: Family, prompts: Sequence[BenchPrompt], sweep: Sweep, max_new_tokens: int = 64,
              limit: int | None = None, repeats: int = 1, progress: ProgressFn | None = None, *,
              params: DecodeParams | None = None, warm_up: bool = True) -> SweepReport:
    """Measured speedup against the Theorem 3.8 prediction for each value of one parameter: each
    value's run paired with its own baseline and each prompt warmed up first, as the suite
    measures (`decoders.bench.suite`)."""
    started = time.perf_counter()
    say = progress or (lambda message: None)
    base = base_params(params, max_new_tokens, repeats)
    method = get_method(sweep.method)
    if method.needs_helper and family.helper is None:
        raise DecodeError(f"cannot sweep {sweep.name}: {family.label} has no helper model; "
                          "give --helper SRC or --self-draft-layer L")

    def at(value: int, params: DecodeParams = base) -> DecodeParams:
        return params.replace(method=sweep.method, **{sweep.name: value}, **method.swept(sweep.name))

    for value in sweep.values:
        at(value).validated()
    notes: list[str] = []
    runnable = prepare(family, prompts, limit, base, notes)
    # one engine, as the suite's: each value paired with its own baseline where the backend can
    engine = bench_engine(family)
    notes += filter(None, [pairing_note(engine)])
    if warm_up:
        prompt, _ = shortest(runnable)
        say(f"warm-up on {prompt.name}")
        engine.run(prompt.text, at(sweep.values[0], base.replace(max_new_tokens=min(8, base.max_new_tokens))))

    per_value: dict[int, list[SweepSample]] = {v: [] for v in sweep.values}
    ar_samples: dict[int, list[OursEntry]] = {v: [] for v in sweep.values}
    total = len(runnable) * repeats
    for repeat in range(repeats):
        for index, (prompt, _) in enumerate(runnable):
            where = head(repeat * len(runnable) + index + 1, total, prompt)
            engine.forget_baselines()  # sequential: the prompt's baseline decoded before its first value
            if warm_up:  # the prompt's first decode, untimed (`Engine.warm`)
                say(f"{where}: warm-up")
                engine.warm(prompt.text, at(sweep.values[0]))
            # alternate the value order from prompt to prompt so that drift does not favour one end
            values = sweep.values if index % 2 == 0 else tuple(reversed(sweep.values))
            for value in values:
                say(f"{where}: {sweep.method} {sweep.name}={value} beside ours ar")
                result = engine.run(prompt.text, at(value))
                ar = OursEntry.of_baseline(result)  # its own (interleaved), else the prompt's (sequential)
                entry = OursEntry.of_run(result)
                entry.compare(ar.ms_per_token, None)
                draft_length = getattr(at(value), method.draft_length) if method.draft_length else None
                predicted, aware = sweep_prediction(entry, draft_length)
                per_value[value].append(SweepSample(**msgspec.structs.asdict(entry), predicted=predicted,
                                                    predicted_cost_aware=aware, question_id=prompt.question_id,
                                                    group=prompt.group, repeat=repeat))
                ar_samples[value].append(ar)

    first = ar_samples[sweep.values[0]]
    return SweepReport(
        family=family_info(family), machine=machine_info(), sweep=sweep,
        settings=SweepSettings(max_new_tokens=base.max_new_tokens, limit=limit, repeats=repeats,
                               decode_params=base.replace(**method.swept(sweep.name)).to_json(),  # as every run had
                               pairing=pairing_of(engine)),
        prompts=prompt_records(runnable), ar_ms_per_token=SideStats.of(first, first).ms_per_token,
        rows=[SweepRow.of(v, per_value[v], ar_samples[v]) for v in sweep.values], samples=per_value, notes=notes,
        elapsed_s=round(time.perf_counter() - started, 1))
