"""The target dtype and draft a family chose at load ("fastest"), kept per machine.

Measuring them takes 5-20 s (`decoders.models.dtype_choice`, `decoders.models.draft_choice`), and
two measurements on a busy machine can land on different winners; the winner depends on what
the machine is, not on the hour. So the first load that measures keeps the choice in a small
JSON file under the cache folder (`$TUI_DECODE_CACHE_DIR`, else the user cache dir, in
``choices/``), written atomically, with the date it was measured, and a later load whose
`ChoiceKey` matches reuses it: no timing, and only the chosen target dtype and draft are built.

The key is what the choice depends on: the CPU's vector features (AVX2, AVX-512, AVX512-BF16,
AMX, ...: they decide whether float16 weights or the int4 kernel are fast), the torch version
(its kernels), the model (its source and a fingerprint of its weights, and the trained head's
files), the backend, the torch thread count, the device, and the dtype setting. One file per
model, backend, threads, device and dtype setting; the CPU features and torch version are checked
inside it, so a cache folder carried to another machine, or a torch upgrade, is measured again
and said so. A damaged file is measured again too, in one line, never a crash.
"""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import msgspec

VERSION = 1
FOLDER = "choices"
MAX_RECORD_BYTES = 64 << 10  # a record is about 2 KB
#: CPU flags that decide which kernels are fast: x86 vector extensions, Arm's SIMD and matrix ones.
VECTOR_PREFIXES = ("avx", "amx", "sse4", "vnni", "asimd", "sve", "sme2", "bf16", "i8mm", "fphp")
VECTOR_FLAGS = frozenset({"fma", "f16c", "sme"})
REMEASURE_HINT = "measured again on request"


class ChoiceKey(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a kept choice was measured on; a load reuses it only when every field matches."""

    cpu: str  # the CPU's vector features, sorted, and torch's kernel level (AVX2, AVX512)
    torch: str
    model: str  # the main model's source and weights fingerprint, the trained head's files
    backend: str  # "fast" (this project's Llama backend) or "transformers"
    threads: int
    device: str
    dtype: str  # the family's dtype setting ("fastest", or the dtype it fixes)


def _sentence_of(record: dict[str, Any] | None, what: str) -> None:
    if record is not None and not isinstance(record.get("sentence"), str):
        raise ValueError(f"its {what} record has no sentence")


class KeptChoice(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One kept choice: its key, when it was measured, and the records the family carries
    (`Family.dtype_choice`, `Family.draft_choice`) as they were when measured."""

    version: int
    key: ChoiceKey
    measured: str  # ISO 8601, local time with its offset
    dtype: Literal["float32", "float16"] | None = None  # the target dtype chosen (None: not chosen here)
    dtype_choice: dict[str, Any] | None = None
    draft: Literal["int4", "head"] | None = None  # the draft chosen (None: no draft was needed yet)
    draft_choice: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.dtype is None) != (self.dtype_choice is None) or (self.draft is None) != (self.draft_choice is None):
            raise ValueError("a choice without its record, or a record without its choice")
        _sentence_of(self.dtype_choice, "dtype")
        _sentence_of(self.draft_choice, "draft")

    @property
    def date(self) -> str:
        return self.measured[:10]


def choices_root() -> Path:
    """The folder of kept choices: beside the converted GGUF copies in the cache folder."""
    from decoders.models.gguf_cache import cache_root

    return cache_root().parent / FOLDER


def cpu_features() -> str:
    """The CPU's vector features (from /proc/cpuinfo where there is one) and torch's kernel level."""
    flags: set[str] = set()
    other = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name.strip() in ("flags", "Features"):
                    flags.update(value.split())
                    break
    except OSError:
        import platform

        other = f"{platform.machine()} {platform.processor()}".strip()
    picked = sorted(flag for flag in flags if flag.startswith(VECTOR_PREFIXES) or flag in VECTOR_FLAGS)
    if other or not flags:  # no /proc/cpuinfo (macOS, Windows): the machine and processor names
        import platform

        picked.append(other or f"{platform.machine()} {platform.processor()}".strip())
    try:
        import torch

        picked.append(f"torch:{torch.backends.cpu.get_cpu_capability()}")
    except (ImportError, AttributeError, RuntimeError):
        pass
    return " ".join(picked)


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def folder_identity(folder: str | os.PathLike | None) -> str:
    """A trained head's identity: its folder and each file's name, size and modification time."""
    if folder is None:
        return "none"
    path = Path(folder)
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8", "surrogatepass"))
    try:
        for entry in sorted(path.iterdir()):
            if entry.is_file():
                stat = entry.stat()
                digest.update(f"{entry.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode("utf-8", "surrogatepass"))
    except OSError as err:
        digest.update(str(err).encode())
    return digest.hexdigest()[:16]


def model_identity(spec, main_model, head: str | None) -> str:
    """The main model's source and weights fingerprint, with the trained head's files and FR-Spec's
    vocabulary: another model under the same name, or the head retrained, is measured again."""
    from decoders.models.drafts import head_of
    from decoders.training.feature_cache import fingerprint

    trained = head_of(spec.draft)
    vocab = f"|vocab {trained.vocab} {trained.vocab_from}" if trained is not None and trained.vocab is not None else ""
    return f"{spec.main}|{fingerprint(main_model)}|head {folder_identity(head)}{vocab}"


def choice_key(spec, main_model, device, fast: bool, head: str | None) -> ChoiceKey:
    import torch

    where = str(device)
    if getattr(device, "type", "") == "cuda":
        where += f" ({torch.cuda.get_device_name(device)})"
    return ChoiceKey(cpu=cpu_features(), torch=torch_version(), model=model_identity(spec, main_model, head),
                     backend="fast" if fast else "transformers", threads=int(torch.get_num_threads()),
                     device=where, dtype=str(spec.dtype))


def choice_file(key: ChoiceKey, root: Path | None = None) -> Path:
    """Where the choice for ``key`` is kept: one file per model, backend, threads, device and dtype
    setting (the CPU and torch version are checked inside it)."""
    name = "\0".join((key.model, key.backend, str(key.threads), key.device, key.dtype))
    return (root or choices_root()) / f"{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:20]}.json"


def _differences(kept: ChoiceKey, key: ChoiceKey) -> str:
    """What changed since ``kept`` was measured, in words."""
    changed = []
    if kept.cpu != key.cpu:
        changed.append("on a CPU with other vector features")
    if kept.torch != key.torch:
        changed.append(f"with torch {kept.torch[:40]} (now {key.torch})")
    for name in ("model", "backend", "threads", "device", "dtype"):
        if getattr(kept, name) != getattr(key, name):
            changed.append(f"for another {name}")
    return " and ".join(changed)


def read_kept(key: ChoiceKey, root: Path | None = None) -> tuple[KeptChoice | None, str | None]:
    """The choice kept for ``key`` and None, or None and why there is none to reuse (None when no
    choice was ever kept here): a damaged file, another version's, or one measured elsewhere."""
    path = choice_file(key, root)
    try:
        if not path.exists() and not path.is_symlink():
            return None, None
        if not path.is_file():
            return None, f"the kept choice {path} is not a file"
        if path.stat().st_size > MAX_RECORD_BYTES:
            return None, f"the kept choice {path} is damaged (over {MAX_RECORD_BYTES >> 10} KiB)"
        data = path.read_bytes()
    except OSError as err:
        from decoders.records.atomic import reason

        return None, f"the kept choice {path} cannot be read ({reason(err)})"
    try:
        version = msgspec.json.decode(data, type=dict[str, Any]).get("version")
        if version != VERSION:
            return None, f"the kept choice {path} was written by another version of tui-decode"
        kept = msgspec.json.decode(data, type=KeptChoice)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as err:
        return None, f"the kept choice {path} is damaged ({str(err)[:120]})"
    if kept.key != key:
        return None, f"the kept choice {path} was measured {_differences(kept.key, key)}"
    return kept, None


def keep(key: ChoiceKey, root: Path | None = None, **choice: Any) -> tuple[KeptChoice, str | None]:
    """Keep ``choice`` (dtype, dtype_choice, draft, draft_choice) for ``key``, measured now: the
    record and None, or the record and why it could not be written (the next load measures again)."""
    from decoders.core.errors import DecodeError
    from decoders.records.atomic import reason, write_bytes

    kept = KeptChoice(version=VERSION, key=key, measured=datetime.now().astimezone().isoformat(timespec="seconds"),
                      **choice)
    path = choice_file(key, root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(path, msgspec.json.format(msgspec.json.encode(kept), indent=1) + b"\n",
                    what="the kept dtype and draft choice")
    except OSError as err:
        return kept, f"the choice could not be kept in {path.parent} ({reason(err)}); the next start measures again"
    except DecodeError as err:
        return kept, f"the choice could not be kept ({err}); the next start measures again"
    return kept, None
