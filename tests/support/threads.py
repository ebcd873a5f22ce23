"""Torch's CPU threads for a stretch of a test: tiny models' ops are microseconds, so a second
thread only adds hand-over cost, and on a machine shared with other busy processes torch's
threads spin against them (a module of tiny-model tests then takes several times as long)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Torch's CPU threads at ``count`` inside the block, restored after it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
