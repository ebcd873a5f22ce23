"""Variants of a method, each a row of its own in the benchmark: a method, parameter overrides and
the draft it uses, under a stable short label ("spec[int4]", "spec[tree 2x3]", "pld[branches 3]").

``--variants`` takes a comma-separated list; each item is ``METHOD`` or ``METHOD[ITEM, ITEM]``
(the label is written the same way, so a label copied from a report selects its row again):

* a draft, for a method that drafts with a helper: ``int4`` (a weight-only int4 copy of the main
  model, `decoders.backends.quantized`), ``early-exit`` (the main model's first layers; ``early-exit 12``
  picks the layer), ``head`` (the family's trained head, `decoders.backends.heads`);
* ``NAME AxB``: two parameters at once, where the method declares the item (`Method.shapes`):
  ``tree WxD``, speculative decoding with a draft tree, W candidates at each of the first D draft
  positions (greedy only);
* ``NAME VALUE`` or ``NAME=VALUE``: any parameter the method declares, or its short alias
  (``pld[branches 3]``, ``lookahead[W 5, N 4]``), within the parameter's declared bounds.

A plain ``METHOD`` is that method as the other flags set it, drafting (where it drafts with a
helper) with the family's own helper; its label is its name, as in reports without variants.
Parsing needs no model; which drafts a family can offer is decided in `decoders.bench.drafts`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from decoders.bench.common import BASELINE, split_backend
from decoders.core.declarations import all_methods, get_method, method_names
from decoders.core.errors import DecodeError
from decoders.models.drafts import switchable_kinds

#: At most this many variants in one run (each one is a run per prompt).
MAX_VARIANTS = 16
#: The deepest early-exit layer a variant may name before the model is known (the model bounds it too).
MAX_EARLY_EXIT_LAYER = 1024
_ITEM = re.compile(r"\s*([A-Za-z_][\w-]*)\s*(?:=\s*|\s+)?(.*?)\s*$", re.S)
_PIECE = re.compile(r"\s*([A-Za-z_][\w-]*)\s*(?:\[(.*)\])?\s*$", re.S)


@dataclass(frozen=True)
class Variant:
    """One row of the bench: ``method`` with ``overrides`` on the run's parameters, drafting
    with ``draft`` (None: the family's own helper)."""

    method: str
    overrides: tuple[tuple[str, Any], ...] = ()
    draft: str | None = None  # None, or a kind of `decoders.models.drafts` that builds from the main model
    layer: int | None = None  # the early-exit layer; None: the family's (or the bench's default)

    @property
    def label(self) -> str:
        """"spec[int4, tree 2x3]": the method's name, then what differs, in a fixed order."""
        items = []
        if self.draft is not None:
            items.append(self.draft + (f" {self.layer}" if self.layer is not None else ""))
        values = dict(self.overrides)
        method = get_method(self.method)
        for shape in method.shapes:
            if shape.first in values and shape.second in values:
                items.append(f"{shape.name} {values.pop(shape.first)}x{values.pop(shape.second)}")
        order = [spec.name for spec in method.params]
        items += [f"{name} {values[name]}" for name in sorted(values, key=order.index)]
        return self.method + (f"[{', '.join(items)}]" if items else "")

    @property
    def plain(self) -> bool:
        return not self.overrides and self.draft is None

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "method": self.method, "params": dict(self.overrides), "draft": self.draft,
                "layer": self.layer}


def example() -> str:
    """A --variants value from the registry: each helper-drafting method with each self-draft, every
    declared variant (`Method.bench_variants`), then the last method as the flags set it."""
    methods = [m for m in all_methods() if m.name != BASELINE]
    items = [f"{m.name}[{kind}]" for m in methods if m.needs_helper for kind in ("int4", "early-exit")]
    items += [Variant(m.name, v).label for m in methods for v in m.bench_variants]
    return ",".join(items + [methods[-1].name] if methods else items)


def shape_items() -> list[str]:
    """The two-parameter items the registered methods declare, as help writes them: "tree WxD"."""
    return list(dict.fromkeys(f"{s.name} {s.letters}" for m in all_methods() for s in m.shapes))


def _hint(methods: bool = False) -> str:
    return (f"write --variants as a comma-separated list of METHOD or METHOD[ITEM, ...], e.g. {example()}"
            + (f" (methods: {', '.join(method_names())})" if methods else ""))


def _split(text: str) -> list[str]:
    """Split at the commas outside brackets; DecodeError for unbalanced brackets."""
    pieces, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise DecodeError(f"bad variants {text!r}: brackets inside brackets; {_hint()}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise DecodeError(f"bad variants {text!r}: a ']' with no '[' before it; {_hint()}")
        elif ch == "," and depth == 0:
            pieces.append(text[start:i])
            start = i + 1
    if depth:
        raise DecodeError(f"bad variants {text!r}: a '[' is never closed; {_hint()}")
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip()]


def _number(piece: str, name: str, value: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise DecodeError(f"bad variant {piece!r}: {name} must be an integer in {low}..{high}, got {value!r}; "
                          f"{_hint()}") from None
    if not low <= number <= high:
        raise DecodeError(f"bad variant {piece!r}: {name} must be an integer in {low}..{high}, got {number}; "
                          f"{_hint()}")
    return number


def _param_value(piece: str, spec, value: str) -> Any:
    if spec.kind == "choice":
        if value not in spec.choices:
            raise DecodeError(f"bad variant {piece!r}: {spec.name} must be one of {', '.join(spec.choices)}, got "
                              f"{value!r}; {_hint()}")
        return value
    if spec.kind == "int":
        return _number(piece, spec.name, value, int(spec.low), int(spec.high))
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not spec.low <= number <= spec.high:
        raise DecodeError(f"bad variant {piece!r}: {spec.name} must be a number in {spec.low:g}..{spec.high:g}, "
                          f"got {value!r}; {_hint()}")
    return number


def parse_variant(piece: str) -> Variant:
    """One ``METHOD`` or ``METHOD[ITEM, ...]``; DecodeError naming what is wrong."""
    match = _PIECE.match(piece)
    if not match:
        raise DecodeError(f"bad variant {piece!r}; {_hint(methods=True)}")
    name, inner = match.group(1), match.group(2)
    if name not in method_names():
        raise DecodeError(f"unknown method {name!r} in variant {piece!r}; {_hint(methods=True)}")
    method = get_method(name)
    if inner is None:
        return Variant(name)
    specs = {spec.name: spec for spec in method.params}
    specs.update({alias: specs[target] for alias, target in method.aliases.items() if target in specs})
    shapes = {shape.name: shape for shape in method.shapes}
    overrides: dict[str, Any] = {}
    draft, layer = None, None
    items = [item.strip() for item in re.split(r"[,;]", inner)]
    if not any(items):
        raise DecodeError(f"bad variant {piece!r}: nothing between the brackets; {_hint()}")
    for item in items:
        m = _ITEM.match(item)
        if not item or not m:
            raise DecodeError(f"bad variant {piece!r}: an empty or unreadable item {item!r}; {_hint()}")
        word, value = m.group(1), m.group(2)
        if word in switchable_kinds():
            if not method.needs_helper:
                raise DecodeError(f"bad variant {piece!r}: {method.label.lower()} decoding drafts with no helper, "
                                  f"so it takes no {word} draft; {_hint()}")
            if draft is not None:
                raise DecodeError(f"bad variant {piece!r}: two drafts ({draft} and {word}); give one; {_hint()}")
            draft = word
            if value and word != "early-exit":
                raise DecodeError(f"bad variant {piece!r}: {word} takes no value; {_hint()}")
            if value:
                layer = _number(piece, "the early-exit layer", value, 1, MAX_EARLY_EXIT_LAYER)
        elif word in shapes:
            shape, numbers = shapes[word], re.fullmatch(r"(\d+)\s*x\s*(\d+)", value)
            if not numbers:
                raise DecodeError(f"bad variant {piece!r}: write the {word} as {word} {shape.letters}"
                                  + (f" ({shape.meaning})" if shape.meaning else "") + f", e.g. {word} 2x3; {_hint()}")
            for key, text in zip((shape.first, shape.second), numbers.groups(), strict=True):
                spec = specs[key]
                assert spec.low is not None and spec.high is not None  # a shape's parameters are integers
                overrides[key] = _number(piece, key, text, int(spec.low), int(spec.high))
        elif word in specs:
            if not value:
                raise DecodeError(f"bad variant {piece!r}: {word} needs a value ({word} VALUE); {_hint()}")
            spec = specs[word]
            if spec.name in overrides:
                raise DecodeError(f"bad variant {piece!r}: {spec.name} is given twice; {_hint()}")
            overrides[spec.name] = _param_value(piece, spec, value)
        else:
            known = ", ".join(list(specs) + (list(switchable_kinds()) if method.needs_helper else [])
                              + [f"{s.name} {s.letters}" for s in method.shapes]) or "none"
            raise DecodeError(f"bad variant {piece!r}: {method.label.lower()} decoding has no item {word!r}; "
                              f"its items are {known}")
    return Variant(name, tuple(overrides.items()), draft, layer)


def parse_variants(text: str) -> tuple[Variant, ...]:
    """``--variants``: every variant, in the order given; autoregressive (the baseline) is left
    out, it is always run. DecodeError for a bad item, a repeated label or too many variants."""
    pieces = _split(text)
    if not pieces:
        raise DecodeError(f"no variants given; {_hint()}")
    if len(pieces) > MAX_VARIANTS:
        raise DecodeError(f"{len(pieces)} variants given, at most {MAX_VARIANTS}; drop some from --variants")
    variants: list[Variant] = []
    for piece in pieces:
        variant = parse_variant(piece)
        if variant.method == BASELINE:
            if not variant.plain:
                raise DecodeError(f"bad variant {piece!r}: autoregressive decoding is the baseline and takes no items")
            continue
        if any(v.label == variant.label for v in variants):
            raise DecodeError(f"variant {variant.label} is listed twice in --variants; give each once")
        variants.append(variant)
    return tuple(variants)


def variant_of(label: str) -> Variant:
    """The variant a label names (a report's row key, its backend left out: "pld[branches 3] [llama.cpp]");
    a plain method for an unreadable one."""
    label, _ = split_backend(label)
    try:
        return parse_variant(label)
    except DecodeError:
        return Variant(label.split("[", 1)[0])
