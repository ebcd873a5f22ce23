"""The bench's rows: each variant resolved against the loaded family, with the draft it uses and
transformers' counterpart it is measured beside.

Drafts are built once per bench run and only when a row needs them: an early exit shares the
main model's weights (it costs nothing); an int4 self-draft (`decoders.backends.quantized`) packs a copy
of them (about 1/8 of the float32 bytes, seconds to build), so it is built the first time a row
asks for it and every int4 row then drafts with that one copy.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from decoders.bench.common import BASELINE
from decoders.bench.reference import Reference
from decoders.bench.settings import RowSettings
from decoders.bench.variants import Variant
from decoders.core.declarations import all_methods, get_method
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.models.drafts import (
    DraftCache,
    DraftTarget,
    EarlyExit,
    kind_of,
    row_choice,
    source_of,
    switchable_kinds,
    unavailable,
)
from decoders.models.family import default_draft_layer

if TYPE_CHECKING:
    from decoders.models.family import Family

def own_draft(family: Family) -> str | None:
    """The kind of the family's own helper (`decoders.models.drafts`): "helper" (a model of its
    own), "early-exit", "int4", "head", ...; None without one."""
    if family.helper is None:
        return None
    if family.helper_model is not None or family.draft is None:
        return "helper"
    return family.draft.kind


@dataclass
class Row:
    """One row of the bench: a variant with its full parameters, the family whose helper it
    drafts with, and the transformers reference for its counterpart."""

    variant: Variant
    params: DecodeParams
    family: Family
    reference: Reference

    label = property(lambda self: self.variant.label)
    method = property(lambda self: self.variant.method)

    @property
    def counterpart(self) -> str | None:
        """The reference's call measured beside this row (transformers' ``generate()``, or
        llama-cpp-python's loop on the llama.cpp backend); None: none exists."""
        return self.reference.counterpart(self.method, self.params)

    @property
    def closest_only(self) -> bool:
        """Whether the counterpart is only the closest one: transformers verifies one linear draft,
        never a tree (`Method.linear` says which parameters draft one)."""
        return self.counterpart is not None and not get_method(self.method).drafts_linearly(self.params)

    def settings(self) -> RowSettings:
        """The row as the report's settings list it."""
        uses_helper = get_method(self.method).needs_helper
        return RowSettings(label=self.label, method=self.method, params=dict(self.variant.overrides),
                           draft=self.variant.draft, layer=self.variant.layer,
                           draft_source=self.family.helper_source if uses_helper else None,
                           transformers_counterpart=self.counterpart, counterpart_is_closest=self.closest_only)


class Drafts:
    """The family's drafts, each built at most once per bench run."""

    def __init__(self, family: Family, reference: Reference, early_exit_layer: int | None = None):
        self.family, self.reference = family, reference
        self.own = own_draft(family)
        self.early_exit_layer = early_exit_layer
        self._cache = DraftCache()  # the drafts built, as the engine keeps them (`decoders.models.drafts`)
        self._families: dict[tuple[str, int | None], Family] = {}
        self._reasons: dict[tuple[str, int | None], str] = {}

    @property
    def n_layers(self) -> int:
        return int(self.family.main.n_layers or 0)

    def layer(self, variant: Variant) -> int:
        """The early-exit layer of ``variant``: its own, the family's, the bench's, else two thirds up."""
        if variant.layer is not None:
            return variant.layer
        if isinstance(self.family.draft, EarlyExit) and self.family.helper is not None:
            return self.family.draft.layer
        return self.early_exit_layer or default_draft_layer(self.n_layers)

    def reason(self, kind: str) -> str | None:
        """Why the family offers no ``kind`` self-draft, or None when it does (nothing is built)."""
        if kind == self.own:
            return None
        if kind == "early-exit" and self.own == "helper":
            return f"{self.family.label} drafts with a helper model of its own; an early exit applies without one"
        return unavailable(kind, DraftTarget.of(self.family))

    def family_for(self, variant: Variant) -> Family:
        """The family whose helper ``variant`` drafts with; DecodeError saying why it has none."""
        kind = variant.draft
        if kind is None:
            if self.family.helper is None:
                raise DecodeError(f"{self.family.label} has no helper model (give --helper SRC, --self-draft int4 "
                                  "or --self-draft-layer L, or pick a variant with a self-draft, e.g. spec[int4])")
            return self.family
        layer = self.layer(variant) if kind == "early-exit" else None
        key = (kind, layer)
        if key in self._reasons:
            raise DecodeError(self._reasons[key])
        if key not in self._families:
            try:
                self._families[key] = self._build(kind, layer)
            except DecodeError as exc:
                self._reasons[key] = str(exc)
                raise
        return self._families[key]

    def _build(self, kind: str, layer: int | None) -> Family:
        family = self.family
        draft = EarlyExit(layer=layer) if kind == "early-exit" and layer is not None else kind_of(kind).default()
        if family.helper is not None and row_choice(family.draft) == draft:  # the family's own
            return family
        why = self.reason(kind)
        if why is not None:
            raise DecodeError(why)
        if isinstance(draft, EarlyExit) and not 1 <= draft.layer < self.n_layers:
            raise DecodeError(f"the early-exit layer must be in 1..{self.n_layers - 1} (the main model has "
                              f"{self.n_layers} layers), got {draft.layer}")
        # DecodeError naming what it cannot take
        backend = self._cache.get(draft, DraftTarget.of(family))
        return dataclasses.replace(family, helper=backend, helper_model=None, draft=draft,
                                   helper_source=source_of(draft, backend))

    def reference_for(self, variant: Variant) -> Reference:
        """transformers configured for ``variant``'s draft: assistant_early_exit at its layer for an
        early exit, none for an int4 self-draft or a trained head (transformers has no such assistant)."""
        if variant.draft is None or variant.draft == self.own:
            if variant.draft != "early-exit" or self.layer(variant) == self.reference.early_exit_layer:
                return self.reference
        ref = copy.copy(self.reference)
        ref.helper_model = None
        ref.early_exit_layer = self.layer(variant) if variant.draft == "early-exit" else None
        return ref


def default_variants(family: Family, drafts: Drafts, notes: list[str]) -> tuple[Variant, ...]:
    """The rows of a run that names neither methods nor variants: every registered method as the
    flags set it, and each variant it declares (`Method.bench_variants`: a draft tree, prompt
    lookup's branches); a method that drafts with a helper also runs with each self-draft the
    family offers (early exit, int4), and its variants with the best of them."""
    rows: list[Variant] = []
    for method in all_methods():
        if method.name == BASELINE:
            continue
        if not method.needs_helper:
            rows += [Variant(method.name)] + [Variant(method.name, v) for v in method.bench_variants]
            continue
        if drafts.own is not None:
            rows.append(Variant(method.name))
        offered = []
        target = DraftTarget.of(drafts.family)
        for kind in switchable_kinds():
            why = drafts.reason(kind)
            if why is None:
                offered.append(kind)
                if kind != drafts.own:
                    rows.append(Variant(method.name, draft=kind))
            elif kind_of(kind).offers(target) and (drafts.own != "helper" or kind != "early-exit"):  # a head if trained
                notes.append(f"{method.name}[{kind}] is not in the default rows: {why}")
        best = "int4" if "int4" in offered else drafts.own or next(iter(offered), None)
        if best is not None:
            rows += [Variant(method.name, v, draft=None if best == drafts.own else best) for v in method.bench_variants]
    return tuple(rows)


def check_variants(variants: Sequence[Variant], base: DecodeParams) -> list[DecodeParams]:
    """Each variant's parameters on ``base``, validated together (e.g. ngram_min <= ngram_max)."""
    checked = []
    for variant in variants:
        try:
            checked.append(base.replace(method=variant.method, **dict(variant.overrides)).validated())
        except DecodeError as exc:
            raise DecodeError(f"variant {variant.label}: {exc}") from None
    return checked


def resolve_rows(drafts: Drafts, variants: Sequence[Variant], base: DecodeParams, notes: list[str]) -> list[Row]:
    """The runnable rows; a row whose draft the family cannot offer is skipped with a note."""
    rows = []
    for variant, params in zip(variants, check_variants(variants, base), strict=False):
        family = drafts.family
        if get_method(variant.method).needs_helper:
            try:
                family = drafts.family_for(variant)
            except DecodeError as exc:
                if variant.plain:
                    notes.append(f"{get_method(variant.method).label.lower()} decoding skipped: {exc}")
                else:
                    notes.append(f"{variant.label} skipped: {exc}")
                continue
        rows.append(Row(variant, params, family, drafts.reference_for(variant)))
    return rows
