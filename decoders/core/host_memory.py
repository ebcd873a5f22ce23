"""How much main memory the operating system says is free for new allocations (Linux:
``MemAvailable`` in /proc/meminfo); None when it cannot tell, and then nothing is refused."""

from __future__ import annotations

from pathlib import Path

MEMINFO = Path("/proc/meminfo")


def format_bytes(n: int) -> str:
    """``n`` bytes in the unit that reads best: 850 KB, 67 MB, 1.4 GB."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{n} bytes"


def host_available_memory() -> int | None:
    """Bytes of main memory available, or None when unknown (no /proc/meminfo: macOS, Windows)."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # the kernel writes kB (KiB)
    except (OSError, ValueError, IndexError):
        return None
    return None
