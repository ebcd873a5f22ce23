"""How much memory is free for something about to be built, and a one-line refusal when too little.

`available_memory` reads the figure the operating system gives (Linux: ``MemAvailable`` in
/proc/meminfo; CUDA: the free bytes torch reports for the device); None when it cannot tell, and
then nothing is refused. `check_memory` takes the figure as an argument so tests can inject it.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING

from decoders.core.errors import DecodeError
from decoders.core.host_memory import format_bytes, host_available_memory

if TYPE_CHECKING:
    import torch

__all__ = ["address_space_left", "available_memory", "check_memory", "format_bytes", "is_allocation_failure",
           "out_of_memory"]

#: How an allocation that failed reads in the errors torch, its allocators and C++ raise.
_ALLOCATION_WORDS = ("out of memory", "not enough memory", "can't allocate memory", "cannot allocate memory",
                     "bad_alloc", "failed to allocate", "defaultcpuallocator", "unable to allocate")
STATUS = Path("/proc/self/status")


def available_memory(device: torch.device | None = None) -> int | None:
    """Bytes free for new tensors on ``device``: the CUDA device's free memory, else the host's
    MemAvailable (or the room left under ``ulimit -v``, when smaller); None when the figure is
    unknown (no /proc/meminfo, no CUDA query)."""
    if device is not None and device.type == "cuda":
        try:
            import torch

            return int(torch.cuda.mem_get_info(device)[0])
        except Exception:  # noqa: BLE001 - an unknown figure refuses nothing
            return None
    if device is not None and device.type != "cpu":
        return None  # MPS shares the host's memory but reports no free figure
    free, room = host_available_memory(), address_space_left()
    known = [n for n in (free, room) if n is not None]
    return min(known) if known else None


def address_space_left() -> int | None:
    """Bytes this process may still map under its address-space limit (``ulimit -v``,
    RLIMIT_AS, less VmSize in /proc/self/status); None when there is no limit or it cannot tell.
    Under such a limit the host's free memory is not what an allocation meets: the limit is."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return None
    if limit == resource.RLIM_INFINITY or limit < 0:
        return None
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmSize:"):
                return max(limit - int(line.split()[1]) * 1024, 0)
    except (OSError, ValueError, IndexError):
        return None
    return None


def is_allocation_failure(error: BaseException) -> bool:
    """Whether ``error`` is an allocation that failed: MemoryError, ENOMEM, or torch's (and its
    allocators') own words for it ("DefaultCPUAllocator: not enough memory", "CUDA out of memory")."""
    if isinstance(error, MemoryError):
        return True
    if isinstance(error, OSError) and error.errno == errno.ENOMEM:
        return True
    if isinstance(error, RuntimeError):
        text = str(error).lower()
        return any(words in text for words in _ALLOCATION_WORDS)
    return False


def out_of_memory(what: str, needed: int | None, fix: str, device: torch.device | None = None) -> DecodeError:
    """One line for an allocation that failed while doing ``what``: the memory it needs (about
    ``needed`` bytes, when known), what is free, and ``fix``."""
    need = f"it needs about {format_bytes(needed)}" if needed else "it needs more than this process may have"
    free, limited = available_memory(device), address_space_left()
    room = ""
    if free is not None and needed and free < needed:
        room = f" and only {format_bytes(free)} is free"
        if limited is not None and limited == free:
            room += " under this process's address-space limit (ulimit -v)"
    return DecodeError(f"Not enough memory to {what}: {need}{room}; {fix}.")


def check_memory(needed: int, what: str, available: int | None, where: str, fix: str) -> None:
    """DecodeError when ``needed`` bytes for ``what`` exceed ``available`` (None: unknown, passes);
    ``where`` reads after "free" ("in main memory", "on cuda:0")."""
    if available is not None and needed > available:
        raise DecodeError(f"Not enough memory for {what}: it needs about {format_bytes(needed)} and "
                          f"only {format_bytes(available)} is free {where}; {fix}.")
