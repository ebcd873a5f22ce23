"""A converted (dequantised, safetensors) copy of each GGUF file, so only the first load is slow.

transformers reads a GGUF by dequantising every tensor (about 20 s for the bundled 135M model);
loading the saved result takes about a second. The copy is keyed by the GGUF's resolved path,
size and modification time, and is written into a temporary folder that is renamed into place
only when complete, so an interrupted conversion never leaves a half-written copy behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from decoders.errors import DecodeError
from decoders.events import LoadProgress


CACHE_ENV = "TUI_DECODE_CACHE_DIR"
MARKER_FILE = "tui-decode-gguf.json"  # written last: a folder without it is not a finished copy
PARTIAL_PREFIX = ".partial-"
STALE_PARTIAL_SECONDS = 3600
GGUF_MAGIC = b"GGUF"

_conversion_lock = threading.Lock()


def cache_root() -> Path:
    """Folder holding converted GGUF copies: $TUI_DECODE_CACHE_DIR, else the user cache dir."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser() / "gguf"
    import platformdirs

    return Path(platformdirs.user_cache_dir("tui-decode")) / "gguf"


def cache_key(gguf_path: str | os.PathLike) -> str:
    """Identity of one version of a GGUF file, cheap to compute (no hashing of 100s of MB)."""
    path = Path(gguf_path).resolve()
    stat = path.stat()
    raw = f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def converted_folder(gguf_path: str | os.PathLike) -> Path:
    """Where the converted copy of ``gguf_path`` lives (whether or not it exists yet)."""
    path = Path(gguf_path)
    return cache_root() / f"{path.stem}-{cache_key(path)}"


def is_converted(gguf_path: str | os.PathLike) -> bool:
    """Whether a finished converted copy of this exact file version is in the cache."""
    return (converted_folder(gguf_path) / MARKER_FILE).is_file()


def discard_converted(gguf_path: str | os.PathLike) -> None:
    """Remove the converted copy of this file version (e.g. after it failed to load)."""
    target = converted_folder(gguf_path)
    with _conversion_lock:
        (target / MARKER_FILE).unlink(missing_ok=True)  # first, so a half-deleted copy is never trusted
        shutil.rmtree(target, ignore_errors=True)


def check_gguf_file(gguf_path: str | os.PathLike) -> Path:
    """The path, after checking it is a readable GGUF file; DecodeError otherwise."""
    path = Path(gguf_path).expanduser()
    if not path.exists():
        raise DecodeError(f"GGUF file {path} does not exist; pass an existing .gguf file or a model folder.")
    if not path.is_file():
        raise DecodeError(f"{path} is not a file; pass a .gguf file or a model folder.")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as err:
        raise DecodeError(f"Cannot read GGUF file {path}: {err.strerror or err}; check its permissions.") from err
    if magic != GGUF_MAGIC:
        raise DecodeError(f"{path} is not a GGUF file (it does not start with 'GGUF'); pass a valid .gguf file.")
    return path


def ensure_converted(gguf_path: str | os.PathLike, progress: LoadProgress | None = None) -> Path:
    """The folder of a transformers model (safetensors + tokenizer) converted from ``gguf_path``.

    Converts on the first call for a given file version (slow), then returns the cached folder.
    """
    path = check_gguf_file(gguf_path).resolve()
    report = progress or _ignore_progress
    target = converted_folder(path)
    if (target / MARKER_FILE).is_file():
        return target
    with _conversion_lock:
        if (target / MARKER_FILE).is_file():  # another thread finished it meanwhile
            return target
        _convert(path, target, report)
    return target


def _convert(path: Path, target: Path, report: LoadProgress) -> None:
    """Dequantise ``path`` through transformers and save it atomically as ``target``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(root)
    if target.exists():  # a folder without the marker: an older, broken copy
        shutil.rmtree(target, ignore_errors=True)
    partial = root / f"{PARTIAL_PREFIX}{target.name}-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    try:
        report(f"Reading the tokenizer of {path.name}", 0.0)
        try:
            with quiet_progress_bars():
                tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
                report(f"Dequantising {path.name} (first load only; later loads use a cached copy)", 0.2)
                with _tensor_progress(report, 0.2, 0.85):
                    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
        except DecodeError:
            raise
        except Exception as err:
            raise DecodeError(f"transformers cannot load GGUF file {path}: {_first_line(err)}") from err
        _clear_quantizer_marker(model)
        report(f"Saving a converted copy to {target}", 0.9)
        partial.mkdir(parents=True)
        with quiet_progress_bars():
            model.save_pretrained(str(partial))
            tokenizer.save_pretrained(str(partial))
        record = {
            "source": str(path),
            "size": path.stat().st_size,
            "mtime_ns": path.stat().st_mtime_ns,
            "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "conversion_seconds": round(time.perf_counter() - started, 1),
        }
        (partial / MARKER_FILE).write_text(json.dumps(record, indent=2))
        del model
        try:
            os.replace(partial, target)
        except OSError:
            if not (target / MARKER_FILE).is_file():  # not a lost race with another process
                raise
        report(f"Converted {path.name}", 1.0)
    except OSError as err:
        raise DecodeError(
            f"Cannot write the converted model to {root}: {err.strerror or err}; "
            f"free disk space or set {CACHE_ENV} to a writable folder."
        ) from err
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)


def _clear_quantizer_marker(model) -> None:
    """Make a dequantised GGUF model saveable.

    The weights are plain float tensors by now, but transformers keeps the GGUF quantizer on the
    model (``hf_quantizer``, ``is_quantized``, ``quantization_method``) and a
    ``quantization_config`` on its config, and refuses ``save_pretrained`` while they are there.
    """
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model, "quantization_method"):
        model.quantization_method = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Keep transformers' tqdm bars off the terminal (the app draws there), then restore them."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _tensor_progress(report: LoadProgress, start: float, end: float) -> Iterator[None]:
    """Route transformers' per-tensor GGUF dequantising progress into ``report``.

    Its tqdm bar would otherwise write to the terminal the app is drawing on.
    """
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:
        yield
        return
    original = getattr(gguf_utils, "tqdm", None)
    if original is None:
        yield
        return

    def reporting(iterable, desc=None, **_kwargs):
        items = list(iterable)
        total = max(len(items), 1)
        step = max(total // 20, 1)
        for index, item in enumerate(items):
            if index % step == 0:
                report(f"Dequantising tensors ({index}/{total})", start + (end - start) * index / total)
            yield item

    gguf_utils.tqdm = reporting
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def _remove_stale_partials(root: Path) -> None:
    """Delete temporary folders left by conversions that were killed (each holds 100s of MB)."""
    now = time.time()
    for entry in root.glob(f"{PARTIAL_PREFIX}*"):
        try:
            if now - entry.stat().st_mtime > STALE_PARTIAL_SECONDS:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            pass


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def _ignore_progress(message: str, fraction: float | None) -> None:
    pass
