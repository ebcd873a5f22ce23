"""A converted (dequantised, safetensors) copy of each GGUF file, so only the first load is slow.

transformers reads a GGUF by dequantising every tensor (about 20 s for the bundled 135M model);
loading the saved result takes about a second. The copy is keyed by the GGUF's resolved path,
size and modification time, and is written into a temporary folder that is renamed into place
only when complete, so an interrupted conversion never leaves a half-written copy behind; the
temporary folders of conversions that were killed are removed on the next start.

The marker file records each file's size, modification time and SHA-256. A load checks the copy
against it: a file whose size or modification time changed is hashed in full (0.5-1 s for the
538 MB bundled model); an unchanged one has a sample of its blocks hashed (milliseconds). The
folder's own files are what is checked: every one must be listed, the weights among them, so a
marker with no checksums, or one listing only some files, is not trusted. A copy that fails the
check is converted afresh.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
import uuid
from pathlib import Path

from decoders.core.errors import DecodeError
from decoders.core.events import LoadProgress
from decoders.models.hf_progress import GGUFProgress, quiet_progress_bars
from decoders.records.stored import UNSET, FileSum, GGUFMarker

CACHE_ENV = "TUI_DECODE_CACHE_DIR"
MARKER_FILE = "tui-decode-gguf.json"  # written last: a folder without it is not a finished copy
PARTIAL_PREFIX = ".partial-"
STALE_PARTIAL_SECONDS = 3600  # a partial folder of a live process older than this is abandoned too
GGUF_MAGIC = b"GGUF"
HASH_CHUNK = 1 << 20
SAMPLE_BLOCK = 1 << 16  # bytes per sampled block
SAMPLE_BLOCKS = 64  # blocks hashed per large file when its size and mtime are unchanged
FULL_HASH_LIMIT = 16 << 20  # files up to this size are always hashed in full

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
    """Remove the converted copy of this file version (e.g. after it failed to load); DecodeError
    when it cannot be removed (a read-only cache), since it would be trusted again next time."""
    target = converted_folder(gguf_path)
    with _conversion_lock:
        try:
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                target.unlink()
                return
            (target / MARKER_FILE).unlink(missing_ok=True)  # first, so a half-deleted copy is never trusted
        except OSError as err:
            raise cache_error(target.parent, f"its damaged copy {target.name} cannot be removed "
                                             f"({_reason(err)})") from None
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


def cache_error(root: Path, problem: str) -> DecodeError:
    return DecodeError(f"Cannot use the model cache folder {root}: {problem}; "
                       f"set {CACHE_ENV} to a writable folder (or free disk space).")


def prepare_cache_root(root: Path | None = None) -> Path:
    """The cache folder, created if needed and checked writable; DecodeError saying how to fix it."""
    root = root or cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise cache_error(root, "it (or a folder above it) is a file, not a folder") from None
    except OSError as err:
        raise cache_error(root, _reason(err)) from None
    if not root.is_dir():
        raise cache_error(root, "it is not a folder")
    try:
        probe = root / f"{PARTIAL_PREFIX}probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        probe.rmdir()
    except OSError as err:
        raise cache_error(root, _reason(err)) from None
    return root


def ensure_converted(gguf_path: str | os.PathLike, progress: LoadProgress | None = None) -> Path:
    """The folder of a transformers model (safetensors + tokenizer) converted from ``gguf_path``.

    Converts on the first call for a given file version (slow), then returns the cached folder
    after checking it against the checksums recorded at conversion (converting afresh if it fails).
    """
    path = check_gguf_file(gguf_path).resolve()
    report = progress or _ignore_progress
    target = converted_folder(path)
    _remove_stale_partials(target.parent)
    if (target / MARKER_FILE).is_file():
        problem = verify_converted(target)
        if problem is None:
            return target
        report(f"The cached copy of {path.name} is damaged ({problem}); converting it again", 0.0)
        discard_converted(path)
    with _conversion_lock:
        if (target / MARKER_FILE).is_file():  # another thread finished it meanwhile
            return target
        _convert(path, target, report)
    return target


def _reason(err: OSError) -> str:
    text = err.strerror or str(err) or type(err).__name__
    return text[:1].lower() + text[1:]


def file_digest(path: Path) -> str:
    """SHA-256 of the whole file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sample_digest(path: Path, size: int) -> str:
    """SHA-256 of SAMPLE_BLOCKS blocks spread evenly over the file (first and last included)."""
    digest = hashlib.sha256()
    span = max(size - SAMPLE_BLOCK, 0)
    with path.open("rb") as handle:
        for i in range(SAMPLE_BLOCKS):
            handle.seek(span * i // (SAMPLE_BLOCKS - 1))
            digest.update(handle.read(SAMPLE_BLOCK))
    return digest.hexdigest()


def folder_checksums(folder: Path) -> dict[str, FileSum]:
    """{file name: its size, mtime_ns, sha256 (and sample)} for every file of a converted copy but the marker."""
    out: dict[str, FileSum] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name == MARKER_FILE or not entry.is_file():
            continue
        stat = entry.stat()
        sample = sample_digest(entry, stat.st_size) if stat.st_size > FULL_HASH_LIMIT else UNSET
        out[entry.name] = FileSum(size=stat.st_size, mtime_ns=stat.st_mtime_ns, sha256=file_digest(entry),
                                  sample=sample)
    return out


def verify_converted(folder: Path, full: bool = False) -> str | None:
    """None when the converted copy in ``folder`` matches its recorded checksums, else what is wrong.

    ``full`` hashes every file whole, even one whose size and modification time are unchanged.
    A copy whose marker records no checksums (an older version's) is converted afresh.
    """
    try:
        files = GGUFMarker.read(folder / MARKER_FILE).files
    except (OSError, DecodeError):
        return "its marker file is unreadable"
    if files is None:
        return "its marker file records no checksums"
    if not files:
        return "its marker file lists no files"
    try:
        present = {e.name for e in folder.iterdir() if e.name != MARKER_FILE}
    except OSError as err:
        return f"the folder cannot be listed ({_reason(err)})"
    unlisted = sorted(present - set(files))
    if unlisted:
        return f"its marker file does not list {unlisted[0]}"
    if not any(str(name).endswith(".safetensors") for name in files):
        return "its marker file lists no weights"
    for name, want in files.items():
        entry = folder / name
        try:
            stat = entry.stat()
            if stat.st_size != want.size:
                return f"{name} has the wrong size"
            unchanged = stat.st_mtime_ns == want.mtime_ns
            if unchanged and want.sample is not UNSET and not full:
                if sample_digest(entry, stat.st_size) != want.sample:
                    return f"{name} does not match its checksum"
            elif file_digest(entry) != want.sha256:
                return f"{name} does not match its checksum"
        except OSError as err:
            return f"{name}: {_reason(err)}"
    return None


def _convert(path: Path, target: Path, report: LoadProgress) -> None:
    """Dequantise ``path`` through transformers and save it atomically as ``target``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from decoders.models.gguf_check import check_gguf_intact

    check_gguf_intact(path)  # a file cut short is one line, before anything is written or dequantised
    root = prepare_cache_root(target.parent)
    _remove_stale_partials(root)
    try:  # before any dequantising: what stands where the copy goes (a broken copy, a stray file)
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()
        elif target.exists():  # a folder without the marker: an older, broken copy
            shutil.rmtree(target)
    except OSError as err:
        raise cache_error(root, f"{target.name} is in the way of the converted copy and cannot be removed "
                                f"({_reason(err)})") from None
    partial = root / f"{PARTIAL_PREFIX}{target.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    try:
        report(f"Reading the tokenizer of {path.name}", 0.0)
        try:
            with quiet_progress_bars(), GGUFProgress(report, path.name).reading() as steps:
                tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
                steps.phase = "model"
                steps.say(f"Dequantising {path.name} (first load only; later loads use a cached copy)", 0.2)
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
        GGUFMarker(source=str(path), size=path.stat().st_size, mtime_ns=path.stat().st_mtime_ns,
                   converted_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
                   conversion_seconds=round(time.perf_counter() - started, 1),
                   files=folder_checksums(partial)).write(partial / MARKER_FILE)
        del model
        try:
            os.replace(partial, target)
        except OSError:
            if not (target / MARKER_FILE).is_file():  # not a lost race with another process
                raise
        report(f"Converted {path.name}", 1.0)
    except OSError as err:  # atomic.WriteError included
        raise DecodeError(
            f"Cannot write the converted model to {root}: {_reason(err)}; "
            f"free disk space or set {CACHE_ENV} to a writable folder."
        ) from None
    except Exception as err:  # safetensors' SafetensorError (a full disk while it writes) is no OSError
        if type(err).__name__ != "SafetensorError":
            raise
        raise DecodeError(
            f"Cannot write the converted model to {root}: {_first_line(err)[:300]}; "
            f"free disk space or set {CACHE_ENV} to a writable folder."
        ) from None
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


def _remove_stale_partials(root: Path) -> None:
    """Delete temporary folders left by conversions that were killed (each holds 100s of MB).

    A partial folder names the process converting into it; it is stale when that process is gone
    (killed by SIGTERM, say), or, for folders without a process id, when older than an hour.
    """
    now = time.time()
    try:
        entries = list(root.glob(f"{PARTIAL_PREFIX}*"))
    except OSError:
        return
    for entry in entries:
        try:
            pid = _partial_pid(entry.name)
            if pid == os.getpid() and _conversion_lock.locked():
                continue  # this process is converting into it right now
            alive = pid is not None and pid != os.getpid() and _process_alive(pid)
            if not alive and (pid is not None or now - entry.stat().st_mtime > STALE_PARTIAL_SECONDS):
                shutil.rmtree(entry, ignore_errors=True)
            elif alive and now - entry.stat().st_mtime > STALE_PARTIAL_SECONDS * 24:
                shutil.rmtree(entry, ignore_errors=True)  # a pid reused long after the conversion died
        except OSError:
            pass


def _partial_pid(name: str) -> int | None:
    """The process id in ``.partial-<target>-<pid>-<hex8>``, or None (older names had none)."""
    parts = name.rsplit("-", 2)
    if len(parts) == 3 and parts[1].isdigit() and len(parts[2]) == 8:
        return int(parts[1])
    return None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    except OSError:
        return True
    return True


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def _ignore_progress(message: str, fraction: float | None) -> None:
    pass
