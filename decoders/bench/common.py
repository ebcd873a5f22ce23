"""What the benchmark's modules share: means and ratios that tolerate gaps, and reading a record
field that a report may leave out (``UNSET``: the key is not in report.json)."""

from __future__ import annotations

import re
import statistics
from typing import Iterable, TypeVar

from msgspec import UnsetType

from decoders.core.declarations import baseline_method

#: The method every speedup is measured against (the registry's baseline: autoregressive decoding).
BASELINE = baseline_method().name

T = TypeVar("T")


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values that are not None (None when there are none)."""
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing or b is zero."""
    return None if a is None or not b else a / b


def rounded(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def off_by(measured: float | None, predicted: float | None, digits: int = 4) -> float | None:
    """How far ``measured`` is from ``predicted`` as a fraction (0.1: 10% above)."""
    return rounded(measured / predicted - 1 if measured and predicted else None, digits)


def known(value: T | UnsetType) -> T | None:
    """A field's value, None where the report leaves it out (UNSET)."""
    return None if isinstance(value, UnsetType) else value


def known_or(value: T | UnsetType, missing: str) -> T | str:
    """A field's value, ``missing`` where the report leaves it out (UNSET)."""
    return missing if isinstance(value, UnsetType) else value


#: How a row label carries the backend it ran on in a run of several (`decoders.bench.multi`):
#: "ar [llama.cpp]", "pld[branches 3] [torch]".
BACKEND_LABELS = {"torch": "torch", "llamacpp": "llama.cpp"}
_ON_BACKEND = re.compile(r"^(.*\S) \[(" + "|".join(re.escape(v) for v in BACKEND_LABELS.values()) + r")\]$", re.S)


def on_backend(label: str, backend: str) -> str:
    """``label`` as the row of ``backend`` ("torch", "llamacpp"): "ar" -> "ar [llama.cpp]"."""
    return f"{label} [{BACKEND_LABELS.get(backend, backend)}]"


def split_backend(label: str) -> tuple[str, str | None]:
    """A row label without its backend, and the backend ("llamacpp"); None where it carries none."""
    match = _ON_BACKEND.match(label)
    if not match:
        return label, None
    names = {shown: key for key, shown in BACKEND_LABELS.items()}
    return match.group(1), names[match.group(2)]
