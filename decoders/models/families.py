"""Named families: the built-in ones plus those a user defines in ``families.toml``.

The config file lives in ``platformdirs.user_config_dir("tui-decode")`` (or in
$TUI_DECODE_CONFIG_DIR) and holds one table per family::

    [families.my-llama]
    main = "/models/llama-3.2-1b"        # folder, .gguf file, hub id, or "bundled"
    helper = "/models/llama-3.2-1b-q4.gguf"
    device = "auto"
    dtype = "auto"
    label = "Llama 3.2 1B + Q4 draft"

    [families.smol-self]
    main = "bundled"
    draft = { kind = "early-exit", layer = 20 }   # what drafts (`decoders.models.drafts`): one table

    [families.smol-llamacpp]
    main = "bundled"
    backend = "llamacpp"                 # llama.cpp runs the GGUF as stored (needs llama-cpp-python)

    [families.smol-int4]
    main = "bundled"
    draft = { kind = "int4" }            # an int4 copy of the main model drafts for it ("head", with
                                         # folder, vocab, vocab_from: a trained head; "fastest", with
                                         # head: whichever is predicted faster here)

The keys files wrote before ``draft`` (``helper``, ``self_draft_layer``, ``self_draft``, ``head``,
``head_vocab``, ``head_vocab_from``) are still read, and turned into the same draft.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, get_args

import msgspec

from decoders.core.errors import DecodeError
from decoders.models.backend_choice import Device, Dtype
from decoders.models.bundled import DEFAULT_FAMILY
from decoders.models.bundled import LABEL as BUNDLED_LABEL
from decoders.models.drafts import Fastest, HelperModel, decode_draft, legacy_draft, self_draft_kinds
from decoders.models.family import FamilySpec
from decoders.records.codec import field_path

CONFIG_ENV = "TUI_DECODE_CONFIG_DIR"
CONFIG_FILE = "families.toml"

BUILTIN_FAMILIES: dict[str, FamilySpec] = {
    spec.name: spec
    for spec in (
        # Which draft pays on the bundled model depends on the CPU (README, "Which draft pays"): the
        # int4 self-draft where bf16 is native (AVX512-BF16, AMX), the trained head elsewhere; so
        # the default measures both once per machine, keeps the choice (decoders/models/kept_choice.py)
        # and drafts with the faster (decoders/models/draft_choice.py).
        # Early exit at layer 20 is accepted 4-26% at c 0.5-1.2 and runs at 0.22x (0.90x adaptive).
        # The target's dtype is measured with it (decoders/models/dtype_choice.py): float16 weights
        # stepped 0.81x float32's on AVX2 and 0.88x on AMX, with a flatter T(k), where fbgemm runs them.
        FamilySpec(name=DEFAULT_FAMILY, main="bundled", label=BUNDLED_LABEL, draft=Fastest(), dtype="fastest"),
        # the same file run by llama.cpp's own kernels as stored (needs llama-cpp-python)
        FamilySpec(name=f"{DEFAULT_FAMILY}-llamacpp", main="bundled", label=f"{BUNDLED_LABEL} on llama.cpp",
                   backend="llamacpp"),
        FamilySpec(
            name="smollm2-360m",
            main="HuggingFaceTB/SmolLM2-360M-Instruct",
            draft=HelperModel(source="HuggingFaceTB/SmolLM2-135M-Instruct"),
            label="SmolLM2-360M-Instruct + 135M helper",
        ),
        FamilySpec(
            name="qwen2.5-1.5b",
            main="Qwen/Qwen2.5-1.5B-Instruct",
            draft=HelperModel(source="Qwen/Qwen2.5-0.5B-Instruct"),
            label="Qwen2.5-1.5B-Instruct + 0.5B helper",
        ),
    )
}


class FamilyTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One ``[families.NAME]`` table as the file holds it: every key declared once, its type and
    its allowed values checked by msgspec (`user_families` turns the error into one line)."""

    main: str
    draft: dict[str, Any] | None = None  # what drafts: {kind = "early-exit", layer = 20} (`decoders.models.drafts`)
    # the keys before `draft`, read and turned into one (`legacy_draft`)
    helper: str | None = None
    self_draft_layer: int | None = None
    self_draft: str | None = None
    head: str | None = None
    head_vocab: int | None = None  # FR-Spec: an EAGLE-1/2 head drafts over the N most frequent tokens
    head_vocab_from: str | None = None  # their ranking: a file of token ids or a train-head corpus folder
    device: Device = "auto"
    dtype: Dtype = "auto"
    label: str | None = None
    backend: Literal["torch", "llamacpp"] = "torch"

    def __post_init__(self) -> None:
        if not self.main.strip():  # an empty main read the current folder
            raise ValueError("has no `main`; set it to a model folder, .gguf file, hub id or \"bundled\".")
        if self.head_vocab is not None and not 1 <= self.head_vocab <= 1 << 20:
            raise ValueError(f"`head_vocab` is {self.head_vocab}; give 1..{1 << 20} (FR-Spec uses 8192-32768).")
        if self.head_vocab is not None and not self.head and self.self_draft not in ("head", "fastest"):
            raise ValueError("sets `head_vocab` (the tokens a trained head drafts over) without a head; add "
                             "`head = \"FOLDER\"` or leave it out.")
        if self.head_vocab_from is not None and self.head_vocab is None:
            raise ValueError("sets `head_vocab_from` without `head_vocab`; give the size too.")
        for key in ("helper", "label", "head", "head_vocab_from"):
            value = getattr(self, key)
            if value is not None and not value.strip():
                raise ValueError(f"`{key}` is empty; give it a value or leave it out.")
        if self.self_draft is not None and self.self_draft not in self_draft_kinds():
            raise ValueError(f"self_draft {self.self_draft!r} is not one of {', '.join(self_draft_kinds())}.")
        old = [key for key in _OLD_DRAFT_KEYS if getattr(self, key) is not None]
        if self.draft is not None:
            if old:
                raise ValueError(f"sets `draft` and `{old[0]}`; keep `draft` (it says all of the draft).")
            decode_draft(self.draft)  # ValueError: what is wrong with it
        else:
            legacy_draft(**{key: getattr(self, key) for key in _OLD_DRAFT_KEYS})  # two drafts: ValueError

    def spec(self, name: str) -> FamilySpec:
        fields = msgspec.structs.asdict(self)
        old = {key: fields.pop(key) for key in _OLD_DRAFT_KEYS}
        fields["draft"] = decode_draft(self.draft) if self.draft is not None else legacy_draft(**old)
        return FamilySpec(name=name, **fields)


_OLD_DRAFT_KEYS = ("helper", "self_draft_layer", "self_draft", "head", "head_vocab", "head_vocab_from")


class ConfigFile(msgspec.Struct):
    """families.toml: its ``families`` table of tables (other top-level keys are not ours)."""

    families: dict[str, Any] = msgspec.field(default_factory=dict)


_KINDS = {"str": "a string", "int": "an integer"}


def _declared(key: str):
    """The type a key of a [families.NAME] table is declared with (str for a key not declared)."""
    return next((f.type for f in msgspec.structs.fields(FamilyTable) if f.name == key), str)


def _choices(key: str) -> tuple[str, ...]:
    """The values a Literal-typed key allows (device: auto, cpu, ...)."""
    return tuple(a for arg in get_args(_declared(key)) for a in (get_args(arg) or (arg,)) if isinstance(a, str))


def _table_error(where: str, table: Any, exc: msgspec.ValidationError) -> str:
    """msgspec's complaint about one table as the line the user fixes it from."""
    key, what = field_path(exc)
    if what.startswith("Expected `object`"):
        return f"{where} must be a table with at least `main = \"...\"`."
    if what.startswith("Object contains unknown field"):
        known = FamilyTable.__struct_fields__
        unknown = sorted(set(table) - set(known))
        return f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}."
    if what.startswith("Object missing required field `main`"):
        return f"{where} has no `main`; set it to a model folder, .gguf file, hub id or \"bundled\"."
    if what.startswith("Invalid enum value"):
        return f"{where}: {key} {table[key]!r} is not one of {', '.join(_choices(key))}."
    if what.startswith("Expected `"):
        kind = "int" if int in (get_args(_declared(key)) or (_declared(key),)) else "str"
        return f"{where}: `{key}` must be {_KINDS[kind]}."
    return f"{where} {what}" if not key else f"{where}: `{key}`: {what}"


def config_path() -> Path:
    """Where the user's family definitions are read from (the file need not exist)."""
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser() / CONFIG_FILE
    import platformdirs

    return Path(platformdirs.user_config_dir("tui-decode")) / CONFIG_FILE


def user_families(path: Path | None = None) -> dict[str, FamilySpec]:
    """Families defined in the user's config file; empty when there is no file."""
    path = path or config_path()
    try:
        present = path.exists() or path.is_symlink()
        is_file = path.is_file()
    except OSError as err:  # a symlink loop, a name too long
        raise DecodeError(f"Config file {path} cannot be read: {err.strerror or err}; fix or remove it.") from None
    if not present:
        above = path.parent
        if above.exists() and not above.is_dir():  # TUI_DECODE_CONFIG_DIR set to the file itself, say
            raise DecodeError(f"The config folder {above} is a file, not a folder; set {CONFIG_ENV} to the folder "
                              f"that holds {CONFIG_FILE} (or unset it).")
        return {}
    if not is_file:
        dangling = path.is_symlink() and not path.exists()
        what = "a symlink that leads to no file (a loop, or its file is gone)" if dangling else "not a file"
        raise DecodeError(f"Config file {path} is {what}; make it a TOML file of [families.NAME] tables, or "
                          "remove it.")
    import tomllib

    from decoders.records.inputs import MAX_CONFIG_BYTES, read_text

    text = read_text(path, "config file", MAX_CONFIG_BYTES, "fix or remove it")
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as err:
        raise DecodeError(f"Config file {path} is not valid TOML: {err}; fix or remove it.") from None
    try:
        tables = msgspec.convert(data, ConfigFile).families
    except msgspec.ValidationError:
        raise DecodeError(f"Config file {path}: `families` must be a table of [families.NAME] tables.") from None
    return {name: _spec_from_table(path, name, table) for name, table in tables.items()}


def _spec_from_table(path: Path, name: str, table: Any) -> FamilySpec:
    """One [families.NAME] table, checked by its declared type; DecodeError naming the key."""
    where = f"Config file {path}, [families.{name}]"
    try:
        return msgspec.convert(table, FamilyTable).spec(name)
    except msgspec.ValidationError as exc:
        raise DecodeError(_table_error(where, table, exc)) from None


def all_families() -> dict[str, FamilySpec]:
    """Built-in families, with the user's definitions added and overriding same-named ones."""
    merged = {name: replace(spec) for name, spec in BUILTIN_FAMILIES.items()}
    merged.update(user_families())
    return merged


def resolve_family(name: str) -> FamilySpec:
    """The family called ``name``; DecodeError listing the known names otherwise."""
    families = all_families()
    if name in families:
        return families[name]
    raise DecodeError(
        f"Unknown family {name!r}; known families: {', '.join(sorted(families))} "
        f"(define more in {config_path()})."
    )
