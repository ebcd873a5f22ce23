"""How much memory is free for something about to be built, and a one-line refusal when too little.

`available_memory` reads the figure the operating system gives (Linux: ``MemAvailable`` in
/proc/meminfo; CUDA: the free bytes torch reports for the device); None when it cannot tell, and
then nothing is refused. `check_memory` takes the figure as an argument so tests can inject it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from decoders.core.errors import DecodeError
from decoders.core.host_memory import format_bytes, host_available_memory

if TYPE_CHECKING:
    import torch

__all__ = ["available_memory", "check_memory", "format_bytes"]

def available_memory(device: torch.device | None = None) -> int | None:
    """Bytes free for new tensors on ``device``: the CUDA device's free memory, else the host's
    MemAvailable; None when the figure is unknown (no /proc/meminfo, no CUDA query)."""
    if device is not None and device.type == "cuda":
        try:
            import torch

            return int(torch.cuda.mem_get_info(device)[0])
        except Exception:  # noqa: BLE001 - an unknown figure refuses nothing
            return None
    if device is not None and device.type != "cpu":
        return None  # MPS shares the host's memory but reports no free figure
    return host_available_memory()


def check_memory(needed: int, what: str, available: int | None, where: str, fix: str) -> None:
    """DecodeError when ``needed`` bytes for ``what`` exceed ``available`` (None: unknown, passes);
    ``where`` reads after "free" ("in main memory", "on cuda:0")."""
    if available is not None and needed > available:
        raise DecodeError(f"Not enough memory for {what}: it needs about {format_bytes(needed)} and "
                          f"only {format_bytes(available)} is free {where}; {fix}.")
