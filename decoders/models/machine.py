"""What makes one machine's measurements its own, and where they are kept.

The CPU kind changes between sessions on the machines this was built on (AVX2 only one day,
AVX-512 with or without BF16/AMX the next), and a figure measured on one says little of another:
a kept measurement (the run-to-run noise calibration) is keyed by the CPU's model and vector
features, its core count, torch's version and threads, and the model (label, device, dtype,
backend) it was measured on.
"""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from decoders.analysis.calibration import Calibration, decode, encode
from decoders.core.errors import DecodeError
from decoders.records.atomic import write_bytes

if TYPE_CHECKING:
    from decoders.models.family import Family

CACHE_ENV = "TUI_DECODE_CACHE_DIR"
#: The vector features that decide which kernels are fast (prefixes of /proc/cpuinfo's flags).
VECTOR_FLAGS = ("avx", "amx", "fma", "f16c", "neon", "sve", "asimd")
#: A calibration file holds at most this many machines (the oldest go first).
MAX_ENTRIES = 64
MAX_FILE = 1 << 20


def cpu_features() -> tuple[str, str]:
    """(model name, the vector features sorted) of this CPU, from /proc/cpuinfo where there is
    one, else what `platform` says."""
    model, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                name = name.strip()
                if name == "model name" and model in ("", platform.processor(), platform.machine()):
                    model = value.strip()
                elif name in ("flags", "Features") and not flags:
                    flags = " ".join(sorted(f for f in value.split() if f.startswith(VECTOR_FLAGS)))
                if model and flags:
                    break
    except OSError:
        pass
    return model, flags


def machine_parts(family: Family, threads: int | None = None) -> dict[str, str]:
    import torch

    model, flags = cpu_features()
    described = family.describe()
    return {"cpu": model, "vector": flags, "cpus": str(os.cpu_count() or 0), "torch": str(torch.__version__),
            "threads": str(threads if threads is not None else torch.get_num_threads()),
            "model": str(described.label), "device": str(described.device),
            "dtype": str(described.dtype), "backend": str(described.backend or "torch")}


def machine_key(parts: dict[str, str]) -> str:
    return hashlib.sha256("\0".join(f"{k}={v}" for k, v in sorted(parts.items())).encode()).hexdigest()[:16]


def calibration_path() -> Path:
    """$TUI_DECODE_CACHE_DIR/calibration.json, else the user cache folder's."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser() / "calibration.json"
    import platformdirs

    return Path(platformdirs.user_cache_dir("tui-decode")) / "calibration.json"


def read_calibrations(path: Path | None = None) -> tuple[dict[str, Calibration], str | None]:
    """The calibrations kept, and a line saying why none could be read (a damaged or foreign
    file: it is measured again and replaced; nothing is raised)."""
    path = path or calibration_path()
    try:
        if path.stat().st_size > MAX_FILE:
            return {}, f"{path} is over {MAX_FILE >> 10} KB, not a calibration file; calibrate again to replace it"
        return decode(path.read_bytes()), None
    except FileNotFoundError:
        return {}, None
    except OSError as error:
        return {}, f"{path} cannot be read ({error.strerror or error}); calibrate again to replace it"
    except (msgspec.ValidationError, msgspec.DecodeError):
        return {}, f"{path} is not a calibration file (damaged?); calibrate again to replace it"


def load_calibration(key: str, path: Path | None = None) -> Calibration | None:
    return read_calibrations(path)[0].get(key)


def save_calibration(calibration: Calibration, path: Path | None = None) -> Path:
    """Keep ``calibration`` beside the other machines' (written atomically); DecodeError in one
    line when the cache folder cannot be written."""
    path = path or calibration_path()
    kept, _ = read_calibrations(path)
    kept.pop(calibration.key, None)
    kept[calibration.key] = calibration
    while len(kept) > MAX_ENTRIES:
        kept.pop(min(kept, key=lambda k: kept[k].measured))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DecodeError(f"the calibration could not be kept: {path.parent} cannot be made "
                          f"({error.strerror or error}); set {CACHE_ENV} to a writable folder") from None
    write_bytes(path, encode(kept), what="the calibration")
    return path
