"""Transformers' own progress bars kept off the terminal the app draws on: silenced, or routed
into a load's progress report (the GGUF dequantising's per-tensor bar)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from decoders.core.events import LoadProgress


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
def tensor_progress(report: LoadProgress, start: float, end: float) -> Iterator[None]:
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
