"""One parameter a person can set (`ParamSpec`): its range, its step, its default, its flag and its
app knob, declared once (`decoders.core.declarations` gathers them into a method's declaration).
Nothing here imports torch."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from decoders.core.errors import DecodeError

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

