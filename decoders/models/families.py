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
    self_draft_layer = 20

    [families.smol-int4]
    main = "bundled"
    self_draft = "int4"                  # an int4 copy of the main model drafts for it
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from decoders.core.errors import DecodeError
from decoders.models.backend_choice import DEVICES, DTYPES
from decoders.models.bundled import DEFAULT_FAMILY
from decoders.models.bundled import LABEL as BUNDLED_LABEL
from decoders.models.family import SELF_DRAFT_KINDS, FamilySpec

CONFIG_ENV = "TUI_DECODE_CONFIG_DIR"
CONFIG_FILE = "families.toml"

BUILTIN_FAMILIES: dict[str, FamilySpec] = {
    spec.name: spec
    for spec in (
        # The int4 self-draft pays best on the bundled model (README, "Adaptive draft length"):
        # early exit at layer 20 is accepted 4-26% at c 0.5-1.2 and runs at 0.22x (0.90x adaptive).
        FamilySpec(name=DEFAULT_FAMILY, main="bundled", label=BUNDLED_LABEL, self_draft="int4"),
        FamilySpec(
            name="smollm2-360m",
            main="HuggingFaceTB/SmolLM2-360M-Instruct",
            helper="HuggingFaceTB/SmolLM2-135M-Instruct",
            label="SmolLM2-360M-Instruct + 135M helper",
        ),
        FamilySpec(
            name="qwen2.5-1.5b",
            main="Qwen/Qwen2.5-1.5B-Instruct",
            helper="Qwen/Qwen2.5-0.5B-Instruct",
            label="Qwen2.5-1.5B-Instruct + 0.5B helper",
        ),
    )
}

_STRING_KEYS = ("main", "helper", "device", "dtype", "label", "self_draft")
_KNOWN_KEYS = frozenset(_STRING_KEYS + ("self_draft_layer",))


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
    tables = data.get("families", {})
    if not isinstance(tables, dict):
        raise DecodeError(f"Config file {path}: `families` must be a table of [families.NAME] tables.")
    return {name: _spec_from_table(path, name, table) for name, table in tables.items()}


def _spec_from_table(path: Path, name: str, table) -> FamilySpec:
    """One [families.NAME] table, checked key by key so the error names what is wrong."""
    where = f"Config file {path}, [families.{name}]"
    if not isinstance(table, dict):
        raise DecodeError(f"{where} must be a table with at least `main = \"...\"`.")
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        raise DecodeError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KNOWN_KEYS))}.")
    for key in _STRING_KEYS:
        if key in table and not isinstance(table[key], str):
            raise DecodeError(f"{where}: `{key}` must be a string.")
    if "main" not in table or not table["main"].strip():
        raise DecodeError(f"{where} has no `main`; set it to a model folder, .gguf file, hub id or \"bundled\".")
    for key in ("helper", "label"):
        if key in table and not table[key].strip():
            raise DecodeError(f"{where}: `{key}` is empty; give it a value or leave it out.")
    layer = table.get("self_draft_layer")
    if layer is not None and (not isinstance(layer, int) or isinstance(layer, bool)):
        raise DecodeError(f"{where}: `self_draft_layer` must be an integer.")
    device = table.get("device", "auto")
    if device not in DEVICES:
        raise DecodeError(f"{where}: device {device!r} is not one of {', '.join(DEVICES)}.")
    dtype = table.get("dtype", "auto")
    if dtype not in DTYPES:
        raise DecodeError(f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}.")
    if table.get("helper") and layer is not None:
        raise DecodeError(f"{where} sets both `helper` and `self_draft_layer`; keep one.")
    self_draft = table.get("self_draft")
    if self_draft is not None:
        if self_draft not in SELF_DRAFT_KINDS:
            raise DecodeError(f"{where}: self_draft {self_draft!r} is not one of {', '.join(SELF_DRAFT_KINDS)}.")
        if table.get("helper") or layer is not None:
            other = "helper" if table.get("helper") else "self_draft_layer"
            raise DecodeError(f"{where} sets `self_draft` and `{other}`; keep one.")
    return FamilySpec(
        name=name,
        main=table["main"],
        helper=table.get("helper"),
        self_draft_layer=layer,
        self_draft=self_draft,
        device=device,
        dtype=dtype,
        label=table.get("label"),
    )


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
