"""How many layers a model has, read without loading it: a GGUF header's block count (walked up to
that key, never its tensors nor its vocabulary), a config.json's ``num_hidden_layers`` (a folder's,
or the hub cache's copy). An early-exit layer out of range is then refused at once, not after a
load of many seconds; where the count cannot be read cheaply, the load checks it as before.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import BinaryIO

from decoders.core.errors import DecodeError

MAX_CONFIG_BYTES = 1 << 20  # a config.json larger than this is not read here (the load reads it)
MAX_KV = 100_000  # a GGUF header claiming more metadata pairs is not walked here
MAX_STRING = 1 << 24  # nor one with a longer string

# GGUF value types (gguf's GGUFValueType): fixed sizes; 8 is a string, 9 an array
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
_INTS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}


def known_layers(source: str) -> int | None:
    """The layer count of the model at ``source`` (as `load_source` takes it), or None when it
    cannot be read without loading (a hub id not in the cache, a file that does not parse: the
    load then says what is wrong)."""
    from decoders.models.sources import classify_source

    try:
        kind, location = classify_source(source)
        if kind == "bundled":
            from decoders.models.bundled import bundled_gguf_path

            location = bundled_gguf_path()
    except DecodeError:
        return None
    if kind in ("bundled", "gguf") and location is not None:
        return gguf_block_count(location)
    if kind == "folder" and location is not None:
        return config_layers(location / "config.json")
    if kind == "hub":
        return config_layers(_cached_hub_config(source))
    return None


def check_draft_layer(spec, flag: str | None = None) -> None:
    """DecodeError when ``spec``'s early-exit layer is not below its main model's layer count, where
    that count is known before loading. ``flag`` names the command-line flag that gave the layer."""
    layer = spec.self_draft_layer
    if layer is None or spec.helper:
        return
    n_layers = known_layers(spec.main)
    if n_layers is None or 1 <= layer < n_layers:
        return
    what = f"{flag} {layer}" if flag else f"Self-draft layer {layer}"
    fix = "give" if flag else "choose"
    raise DecodeError(f"{what} is out of range: the main model has {n_layers} layers, so {fix} a layer from 1 to "
                      f"{n_layers - 1}.")


def config_layers(path: Path | None) -> int | None:
    """``num_hidden_layers`` of a config.json (or of its ``text_config``), or None."""
    try:
        if path is None or not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for where in (config, config.get("text_config") if isinstance(config, dict) else None):
        count = where.get("num_hidden_layers") if isinstance(where, dict) else None
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            return count
    return None


def gguf_block_count(path: Path) -> int | None:
    """``{architecture}.block_count`` from a GGUF file's metadata, or None (another version, a
    damaged header, no such key)."""
    try:
        with open(path, "rb") as f:
            return _block_count(f)
    except (OSError, struct.error, ValueError, UnicodeDecodeError):
        return None


def _block_count(f: BinaryIO) -> int | None:
    if f.read(4) != b"GGUF":
        return None
    version, = _unpack(f, "<I")
    if version not in (2, 3):  # 1 counts in 32 bits; a big-endian file reads as a huge version
        return None
    _, n_kv = _unpack(f, "<QQ")
    if n_kv > MAX_KV:
        return None
    arch, counts = None, {}
    for _ in range(n_kv):
        key = _string(f)
        kind, = _unpack(f, "<I")
        if key == "general.architecture" and kind == _STRING:
            arch = _string(f)
        elif key.endswith(".block_count") and kind in _INTS:
            value, = _unpack(f, _INTS[kind])
            counts[key[: -len(".block_count")]] = value
        else:
            _skip(f, kind)
        if arch is not None and arch in counts:
            count = counts[arch]
            return count if count > 0 else None
    return None


def _unpack(f: BinaryIO, fmt: str) -> tuple:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("the header ends early")
    return struct.unpack(fmt, data)


def _string(f: BinaryIO) -> str:
    length, = _unpack(f, "<Q")
    if length > MAX_STRING:
        raise ValueError("a string longer than any header holds")
    data = f.read(length)
    if len(data) != length:
        raise ValueError("the header ends early")
    return data.decode("utf-8")


def _skip(f: BinaryIO, kind: int) -> None:
    if kind in _SIZES:
        f.seek(_SIZES[kind], 1)
    elif kind == _STRING:
        length, = _unpack(f, "<Q")
        f.seek(length, 1)
    elif kind == _ARRAY:
        inner, count = _unpack(f, "<IQ")
        if inner in _SIZES:
            f.seek(_SIZES[inner] * count, 1)
        else:
            for _ in range(count):
                _skip(f, inner)
    else:
        raise ValueError(f"unknown GGUF value type {kind}")


def _cached_hub_config(repo_id: str) -> Path | None:
    """The hub cache's config.json of ``repo_id``, without asking the hub; None when not cached."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - an id the hub library will not take: the load says why
        return None
    return Path(found) if isinstance(found, str) else None
