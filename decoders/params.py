"""Decoding parameters, validated in one place so that the CLI and the app report the same errors."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from decoders.errors import DecodeError

METHODS = ("ar", "spec", "pld", "jacobi")
METHOD_NAMES = {
    "ar": "Autoregressive",
    "spec": "Speculative",
    "pld": "Prompt lookup",
    "jacobi": "Jacobi",
}
MODES = ("greedy", "sampling")
INITS = ("repeat", "random")
DRAFT_POLICIES = ("adaptive", "fixed")


@dataclass(frozen=True)
class DecodeParams:
    """Everything that decides what a method run does, besides the model family and the prompt."""

    method: str = "spec"
    max_new_tokens: int = 64
    mode: str = "greedy"
    temperature: float = 1.0
    seed: int = 0
    gamma: int = 4  # speculative: tokens drafted per iteration
    num_pred: int = 10  # prompt lookup: at most k tokens copied per iteration
    ngram_max: int = 3
    ngram_min: int = 1
    draft_policy: str = "adaptive"  # prompt lookup: "fixed" drafts every match up to k tokens
    block: int = 4  # Jacobi: block size m
    init: str = "repeat"  # Jacobi: initial fill of the block
    chat_template: bool = True
    record: bool = True  # keep probabilities and top-5 per draft position (off for timing studies)

    def validated(self) -> DecodeParams:
        """Return self, or raise DecodeError naming the bad value and the fix."""
        if self.method not in METHODS:
            raise DecodeError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.mode not in MODES:
            raise DecodeError(f"unknown mode {self.mode!r}; choose greedy or sampling")
        if self.draft_policy not in DRAFT_POLICIES:
            raise DecodeError(f"unknown draft policy {self.draft_policy!r}; choose adaptive or fixed")
        if self.init not in INITS:
            raise DecodeError(f"unknown Jacobi init {self.init!r}; choose repeat or random")
        for name, flag in (("max_new_tokens", "--max-new-tokens"), ("gamma", "--gamma"),
                           ("num_pred", "--num-pred"), ("block", "--block"),
                           ("ngram_max", "--ngram-max"), ("ngram_min", "--ngram-min")):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise DecodeError(f"{name} must be an integer >= 1, got {value!r}; set {flag} to 1 or more")
        if self.ngram_min > self.ngram_max:
            raise DecodeError(f"ngram_min ({self.ngram_min}) is larger than ngram_max ({self.ngram_max}); "
                              "set --ngram-min <= --ngram-max")
        if self.mode == "sampling" and not self.temperature > 0:
            raise DecodeError(f"temperature must be > 0 in sampling mode, got {self.temperature}; "
                              "set --temperature to a positive value (1.0 samples the model as is) or use --mode greedy")
        if self.mode == "sampling" and self.method in ("pld", "jacobi"):
            raise DecodeError(f"{METHOD_NAMES[self.method]} decoding is greedy only; use --mode greedy, "
                              "or --method spec / ar for sampling")
        return self

    @property
    def greedy(self) -> bool:
        return self.mode == "greedy"

    def replace(self, **changes: Any) -> DecodeParams:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DecodeParams:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def baseline_key(self) -> tuple:
        """What decides the autoregressive baseline: greedy runs ignore temperature and seed."""
        if self.greedy:
            return (self.max_new_tokens, "greedy")
        return (self.max_new_tokens, "sampling", self.temperature, self.seed)
