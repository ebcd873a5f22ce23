"""What drafts for speculative decoding, declared once: a tagged union of records, one per kind,
and the one service that builds them.

A draft is a value (`Draft`): the family spec, ``families.toml``, the command line, the app's
settings and the bench's rows all hold one, and two kinds cannot be held at once (a helper model
*and* an early-exit layer is not a value this type has). Each kind is declared once
(`DraftKind`: its record, its builder and its view) in `DRAFT_KINDS`; `build_draft` builds any
of them from a loaded target, and the engine, the bench and the app all build through it. The
built-in kinds' builders are in `decoders.models.draft_builders`.

The kinds:

* ``helper``: a model of its own sharing the main model's tokenizer (loaded with the family);
* ``early-exit``: the main model's first ``layer`` layers (shares the weights; costs nothing);
* ``int4``: a weight-only int4 copy of the main model (`decoders.backends.quantized`);
* ``head``: a trained EAGLE / Medusa head, with FR-Spec's vocabulary (`decoders.backends.heads`);
* ``fastest``: int4 or the trained head, whichever is measured faster here at load
  (`decoders.models.draft_choice`).

A kind to come (suffix drafts, synthetic drafts) is one more `Draft` subclass with its tag, a
builder, and `register`: the command line's ``--self-draft``, the bench's ``--variants`` and the
app's draft row offer every registered kind that `DraftKind.switchable` says can be built after
the family loads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Union

import msgspec

from decoders.core.errors import DecodeError
from decoders.models import draft_builders as build

if TYPE_CHECKING:
    from decoders.backends.hf import Backend
    from decoders.records.family_info import FamilyInfo


#: An early-exit layer before the model says how many it has (the largest models have ~128).
MAX_LAYER = 1024
#: FR-Spec's subset of the vocabulary; the model's own vocabulary bounds it again once it loads.
MAX_HEAD_VOCAB = 1 << 20


class Draft(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="kind"):
    """What drafts: one of the kinds declared in `DRAFT_KINDS` (never this base itself)."""

    @property
    def kind(self) -> str:
        """The kind's name: its tag (the word the command line, the bench and the files use)."""
        return str(type(self).__struct_config__.tag)

    def view(self) -> str:
        """How the draft reads in the app and in records ("early exit @ layer 20")."""
        return kind_of(self.kind).view(self)


class HelperModel(Draft, frozen=True, tag="helper"):
    """A model of its own, sharing the main model's tokenizer: a hub id, a folder or a .gguf file."""

    source: str


class EarlyExit(Draft, frozen=True, tag="early-exit"):
    """The main model's first ``layer`` layers, sharing its weights."""

    layer: Annotated[int, msgspec.Meta(ge=1, le=MAX_LAYER)]


class Int4(Draft, frozen=True, tag="int4"):
    """A weight-only int4 copy of the main model, packed at load (about 1/8 of its float32 bytes)."""


class TrainedHead(Draft, frozen=True, tag="head"):
    """A trained head (EAGLE-1/2, EAGLE-3 or Medusa): in ``folder`` (None or "bundled": the head
    shipped for the bundled model); ``vocab``: FR-Spec's N most frequent tokens, ranked by
    ``vocab_from`` (a file of ids or a train-head corpus; default for the bundled model: its corpus)."""

    folder: str | None = None
    vocab: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEAD_VOCAB)] | None = None
    vocab_from: str | None = None


class Fastest(Draft, frozen=True, tag="fastest"):
    """int4 or the trained head ``head``, whichever is predicted to pay most on this machine."""

    head: TrainedHead = msgspec.field(default_factory=TrainedHead)


@dataclass(frozen=True)
class DraftTarget:
    """What a builder builds a draft of: the loaded main model (`Family` gives one, `of`)."""

    main: Any  # the main model's backend
    main_model: Any = None  # its transformers module (None: llama.cpp, or a family that keeps none)
    main_name: str = ""  # the main model's source as the spec names it ("bundled": the shipped head)
    device_map: str | dict | None = None
    backend: str = "torch"
    head: TrainedHead | None = None  # the trained head at hand (its folder resolved)

    @classmethod
    def of(cls, family: Any) -> DraftTarget:
        return cls(main=family.main, main_model=family.main_model, main_name=family.main_source,
                   device_map=family.device_map, backend=family.backend, head=family.head)


@dataclass(frozen=True)
class DraftKind:
    """One kind of draft: its record type, how to build it from a loaded main model, how it reads.

    ``switchable``: built from the loaded main model alone, so the app's draft row, the bench's
    variants and ``--self-draft`` offer it (a helper model and "fastest" are chosen at load).
    ``unavailable``: why a target cannot have it, without building it (None: it may)."""

    type: type[Draft]
    build: Callable[[Any, DraftTarget], Backend]
    view: Callable[[Any], str]
    switchable: bool = True
    help: str = ""
    loading: str = ""  # what the load's progress says while it builds (default: "Building the <view>")
    unavailable: Callable[[DraftTarget], str | None] | None = None
    #: Whether the app's draft row and the bench's default rows offer it at all for ``target`` (a
    #: trained head only where one is at hand); one offered may still fail to build, in one line.
    offered: Callable[[DraftTarget], bool] | None = None

    def offers(self, target: DraftTarget) -> bool:
        return self.switchable and (self.offered is None or self.offered(target))

    @property
    def name(self) -> str:
        return str(self.type.__struct_config__.tag)

    def default(self) -> Draft:
        """The kind with its defaults (what ``--self-draft NAME`` and the draft row ask for)."""
        return self.type()


DRAFT_KINDS: dict[str, DraftKind] = {}


def register(kind: DraftKind) -> DraftKind:
    """Declare a kind of draft (its name is its record's tag)."""
    DRAFT_KINDS[kind.name] = kind
    return kind


@contextmanager
def registered(kind: DraftKind) -> Iterator[DraftKind]:
    """``kind`` declared for the length of the block (a test's own kind)."""
    register(kind)
    try:
        yield kind
    finally:
        DRAFT_KINDS.pop(kind.name, None)


def kind_of(name: str) -> DraftKind:
    """The declared kind called ``name``; DecodeError listing the known ones."""
    try:
        return DRAFT_KINDS[name]
    except KeyError:
        raise DecodeError(f"Unknown draft kind {name!r}; choose one of {', '.join(DRAFT_KINDS)}.") from None


def switchable_kinds() -> tuple[str, ...]:
    """The kinds built from a loaded main model alone, in declaration order."""
    return tuple(name for name, kind in DRAFT_KINDS.items() if kind.switchable)


def self_draft_kinds() -> tuple[str, ...]:
    """What ``--self-draft`` and ``self_draft =`` take: the switchable kinds but early exit (which
    takes a layer: ``--self-draft-layer``), and "fastest"."""
    return tuple(n for n in (*switchable_kinds(), "fastest") if n in DRAFT_KINDS and n != "early-exit")


def draft_type() -> Any:
    """The union of the declared kinds, as msgspec decodes it (read at call time: a kind declared
    later is included)."""
    types = tuple(kind.type for kind in DRAFT_KINDS.values())
    return Union[types] if len(types) > 1 else types[0]  # noqa: UP007 (a union built at run time)


def decode_draft(data: Any) -> Draft:
    """A draft from its plain form (``{"kind": "early-exit", "layer": 20}``); ValueError in one line."""
    try:
        return msgspec.convert(data, draft_type())
    except msgspec.ValidationError as err:
        raise ValueError(f"not a draft ({err}); kinds: {', '.join(DRAFT_KINDS)}") from None


def encode_draft(draft: Draft | None) -> dict[str, Any] | None:
    """The plain form of ``draft`` (what files and saved runs hold)."""
    return None if draft is None else msgspec.to_builtins(draft)


def named_draft(name: str) -> Draft:
    """The draft ``--self-draft NAME`` asks for: a kind with its defaults; DecodeError otherwise."""
    if name not in self_draft_kinds():
        raise DecodeError(f"unknown --self-draft kind {name!r}; choose one of {', '.join(self_draft_kinds())}")
    return kind_of(name).default()


def legacy_draft(helper: str | None = None, self_draft_layer: int | None = None, self_draft: str | None = None,
                 head: str | None = None, head_vocab: int | None = None,
                 head_vocab_from: str | None = None) -> Draft | None:
    """The draft the old field names ask for (families.toml, `FamilySpec` before `Draft`): a helper
    model, an early-exit layer, a self-draft kind, a head and its vocabulary. ValueError (one
    line) for two drafts at once."""
    if helper and self_draft_layer is not None:
        raise ValueError("sets both `helper` and `self_draft_layer`; keep one.")
    if head and (helper or self_draft_layer is not None or self_draft not in (None, "head", "fastest")):
        raise ValueError("sets `head` and another draft; keep one.")
    if self_draft is not None and (helper or self_draft_layer is not None):
        raise ValueError(f"sets `self_draft` and `{'helper' if helper else 'self_draft_layer'}`; keep one.")
    trained = TrainedHead(folder=head, vocab=head_vocab, vocab_from=head_vocab_from)
    if helper:
        return HelperModel(source=helper)
    if self_draft_layer is not None:
        return EarlyExit(layer=self_draft_layer)
    if self_draft == "fastest":
        return Fastest(head=trained)
    if self_draft == "head" or (self_draft is None and head):
        return trained
    if self_draft is not None:
        return kind_of(self_draft).default()
    return None


def run_draft(family: FamilyInfo) -> Draft | None:
    """What drafted for a saved run, from its ``family`` record: its ``draft`` (runs saved since
    `Draft`), else read from the ``helper`` text older runs hold ("early exit @ layer 20", "int4
    self-draft", a head's "eagle3 head FOLDER", else a helper model's source); None: no draft, or
    a record that says nothing readable."""
    if isinstance(family.draft, dict):
        try:
            return decode_draft(family.draft)
        except ValueError:
            return None  # a kind this version does not declare: the run opens, its draft unknown
    helper = family.helper
    if not helper:
        return None
    match = _EARLY_EXIT_TEXT.fullmatch(helper)
    if match:
        return EarlyExit(layer=int(match.group(1)))
    match = _SELF_DRAFT_TEXT.fullmatch(helper)
    if match and match.group(1) in switchable_kinds():
        return kind_of(match.group(1)).default()
    match = _HEAD_TEXT.fullmatch(helper)
    if match:
        return TrainedHead(folder=match.group(1))
    return HelperModel(source=helper)


_EARLY_EXIT_TEXT = re.compile(r"early exit @ layer (\d{1,4})")
_SELF_DRAFT_TEXT = re.compile(r"([\w-]+) self-draft")
_HEAD_TEXT = re.compile(r"(?:eagle\d|medusa)(?:, FR-Spec \d+ tokens)? heads? (.+)")


def head_of(draft: Draft | None) -> TrainedHead | None:
    """The trained head ``draft`` names (a head, or "fastest"'s candidate head)."""
    if isinstance(draft, TrainedHead):
        return draft
    if isinstance(draft, Fastest):
        return draft.head
    return None


def self_draft_kind(draft: Draft | None) -> str | None:
    """The kind of a draft built from the main model but an early exit ("int4", "head", "fastest"),
    else None: the older ``self_draft`` field's value, as a view of ``draft``."""
    return None if draft is None or isinstance(draft, (HelperModel, EarlyExit)) else draft.kind


def row_choice(draft: Draft | None) -> Draft | None:
    """``draft`` as the app's draft row and the bench's variants name it: an early exit by its
    layer, a helper model as None (the family's own), any other kind with its defaults."""
    if draft is None or isinstance(draft, (HelperModel, Fastest)):
        return None
    if isinstance(draft, EarlyExit):
        return draft
    return kind_of(draft.kind).default()


def build_draft(draft: Draft, target: DraftTarget, warm: bool = False) -> Backend:
    """The backend that drafts as ``draft`` for ``target`` (warmed up when ``warm``); DecodeError
    says why it cannot be built (a shape the kernel cannot take, too little memory, no head)."""
    kind = kind_of(draft.kind)
    if target.backend != "torch":
        from decoders.models.llamacpp_family import no_torch_draft

        raise DecodeError(no_torch_draft(draft))
    backend = kind.build(draft, target)
    if warm:
        from decoders.models.backend_choice import warm_up

        warm_up(backend)
    return backend


class DraftCache:
    """The drafts of one loaded main model, each built once by `build_draft` (and a build that
    failed fails again at once, with the same line): the engine's and the bench's."""

    def __init__(self) -> None:
        self._built: dict[Draft, Backend] = {}
        self._failed: dict[Draft, str] = {}

    def __contains__(self, draft: object) -> bool:
        return draft in self._built

    def keep(self, draft: Draft, backend: Backend) -> None:
        """``backend`` as ``draft`` (a draft the family loaded with)."""
        self._built[draft] = backend

    def get(self, draft: Draft, target: DraftTarget) -> Backend:
        """``draft`` for ``target``, built and warmed up the first time (an early exit, which
        shares the main model's weights, is not warmed)."""
        if draft in self._failed:
            raise DecodeError(self._failed[draft])
        backend = self._built.get(draft)
        if backend is None:
            try:
                backend = build_draft(draft, target, warm=not isinstance(draft, EarlyExit))
            except DecodeError as err:
                self._failed[draft] = str(err)
                raise
            self._built[draft] = backend
        return backend


def source_of(draft: Draft, backend: Any) -> str:
    """How a built draft is recorded (a run's ``helper``): the backend's own source (a head's
    folder), else the draft's view."""
    from decoders.backends.capabilities import NamedSource

    return (backend.source if isinstance(backend, NamedSource) else None) or draft.view()


def unavailable(name: str, target: DraftTarget) -> str | None:
    """Why ``target`` cannot have the ``name`` kind (nothing is built); None when it may."""
    kind = kind_of(name)
    if kind.unavailable is not None:
        return kind.unavailable(target)
    return None if target.main_model is not None else "the family does not expose its transformers model to quantize"


def resolve_head(head: TrainedHead, main_name: str, missing_ok: bool = False) -> TrainedHead | None:
    """``head`` with its folder found (the bundled model's shipped head) and its ranking's source
    (the bundled model's corpus); None when ``missing_ok`` and there is no head."""
    from decoders.models.backend_choice import head_folder, head_vocab_of

    folder = head_folder(head.folder, main_name, missing_ok=missing_ok)
    if folder is None:
        return None
    vocab = head_vocab_of(head, main_name)
    return TrainedHead(folder=folder, vocab=vocab[0] if vocab else None, vocab_from=vocab[1] if vocab else None)


# -- the built-in kinds (their builders: `decoders.models.draft_builders`) ---------------------------

register(DraftKind(HelperModel, build.load_time_only, lambda d: d.source, switchable=False,
                   help="a helper model sharing the main model's tokenizer"))
register(DraftKind(EarlyExit, build.early_exit, lambda d: f"early exit @ layer {d.layer}",
                   help="the main model's first layers", unavailable=build.early_exit_unavailable))
register(DraftKind(Int4, build.int4, lambda d: "int4 self-draft", help="a weight-only int4 copy of the main model",
                   loading="Quantizing the main model to int4 for the draft", unavailable=build.int4_unavailable))
register(DraftKind(TrainedHead, build.head, lambda d: "trained head", help="a trained EAGLE / Medusa head",
                   loading="Loading the trained draft head", unavailable=build.head_unavailable,
                   offered=lambda target: target.head is not None))
register(DraftKind(Fastest, build.load_time_only,
                   lambda d: "int4 or the trained head, whichever is faster here (measured at load)",
                   switchable=False, help="int4 or the trained head, measured at load"))
