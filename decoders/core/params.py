"""Decoding parameters: the common ones declared here, each method's declared by the method.

`DecodeParams` has one field per declared parameter (`ParamSpec`), with the declared default,
and validates them all in one place, so the command line, the bench and the app report the
same errors with the same bounds.
"""

from __future__ import annotations

from typing import Any

from decoders.core.declarations import (
    COMMON_PARAMS,
    MIN_SAMPLING_TEMPERATURE,
    SWITCHES,
    ParamSpec,
    all_methods,
    default_method,
    get_method,
    method_names,
)
from decoders.core.errors import DecodeError


def all_param_specs() -> dict[str, ParamSpec]:
    """Every declared parameter by name: the common ones, then each registered method's."""
    specs = {spec.name: spec for spec in COMMON_PARAMS}
    for method in all_methods():
        for spec in method.params:
            specs.setdefault(spec.name, spec)
    return specs


def method_param_specs() -> dict[str, ParamSpec]:
    """The parameters methods declare (not the common ones), by name."""
    common = {spec.name for spec in COMMON_PARAMS}
    return {name: spec for name, spec in all_param_specs().items() if name not in common}


def specs_for(method: str) -> tuple[ParamSpec, ...]:
    """The parameters that matter for ``method``: the common ones, then its own."""
    return COMMON_PARAMS + get_method(method).params


class DecodeParams:
    """Everything that decides what a method run does, besides the model family and the prompt.

    Immutable; ``DecodeParams(method="spec", gamma=5)``, ``params.gamma``, ``params.replace(...)``.
    """

    __slots__ = ("_values",)

    def __init__(self, method: str | None = None, **values: Any):
        """``method``: a registered method's name (None: the registry's default method)."""
        known = {name: spec.default for name, spec in all_param_specs().items()}
        known.update(SWITCHES)
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise TypeError(f"unknown decoding parameter(s): {', '.join(unknown)}")
        known.update(values)
        known["method"] = method if method is not None else default_method().name
        object.__setattr__(self, "_values", known)

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        spec = all_param_specs().get(name)  # a method registered after this object was made
        if spec is not None:
            return spec.default
        raise AttributeError(f"DecodeParams has no parameter {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("DecodeParams is immutable; use .replace(...)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DecodeParams) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self._values.items())))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"DecodeParams({inner})"

    @property
    def method_def(self):
        """The registered `Method` this run uses."""
        return get_method(self.method)

    @property
    def greedy(self) -> bool:
        return self.mode == "greedy"

    def validated(self, ui: bool = False) -> DecodeParams:
        """Return self, or raise DecodeError naming the bad value, its bounds and the fix.

        ``ui`` words the fix for the app's parameters pane rather than for command-line flags.
        """
        method = get_method(self.method)
        sampling_t = self.mode == "sampling" and isinstance(self.temperature, (int, float)) \
            and not isinstance(self.temperature, bool) and self.temperature == self.temperature
        for name, spec in all_param_specs().items():
            if name == "temperature" and sampling_t and self.temperature < MIN_SAMPLING_TEMPERATURE:
                continue  # said below with the sampling bound (0 would be refused there too)
            spec.validate(getattr(self, name), ui=ui)
        for name in SWITCHES:
            if not isinstance(getattr(self, name), bool):
                raise DecodeError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.mode == "sampling" and not self.temperature > 0:
            fix = ("raise the temperature" if ui else "set --temperature to a positive value")
            raise DecodeError(f"temperature must be > 0 in sampling mode (at least {MIN_SAMPLING_TEMPERATURE}), "
                              f"got {self.temperature}; {fix} (1.0 samples the model as is) or use greedy mode")
        if self.mode == "sampling" and self.temperature < MIN_SAMPLING_TEMPERATURE:
            fix = (f"raise the temperature to {MIN_SAMPLING_TEMPERATURE} or more" if ui
                   else f"set --temperature to {MIN_SAMPLING_TEMPERATURE} or more")
            raise DecodeError(f"temperature must be at least {MIN_SAMPLING_TEMPERATURE} in sampling mode, got "
                              f"{self.temperature:g}; {fix}, or use greedy mode for the most likely token")
        if self.mode == "sampling" and method.greedy_only:
            samplers = " / ".join(m.name for m in all_methods() if not m.greedy_only)
            fix = "switch to greedy mode" if ui else f"use --mode greedy, or --method {samplers} for sampling"
            raise DecodeError(f"{method.label} decoding is greedy only; {fix}")
        if method.check is not None:
            method.check(self, ui)
        return self

    def replace(self, **changes: Any) -> DecodeParams:
        values = dict(self._values)
        values.update(changes)
        return DecodeParams(**values)

    def to_json(self) -> dict[str, Any]:
        return dict(self._values)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DecodeParams:
        names = set(all_param_specs()) | set(SWITCHES) | {"method"}
        return cls(**{k: v for k, v in d.items() if k in names})

    def baseline_key(self) -> tuple:
        """What decides the autoregressive baseline: greedy runs ignore temperature and seed."""
        if self.greedy:
            return (self.max_new_tokens, "greedy")
        return (self.max_new_tokens, "sampling", self.temperature, self.seed)


def __getattr__(name: str):
    """``METHODS``: the registered method names, in list order, read when asked for (a method
    registered later, a test's say, is included)."""
    if name == "METHODS":
        return method_names()
    if name == "METHOD_NAMES":  # name -> label, for lists and titles
        return {m.name: m.label for m in all_methods()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
