"""Worker events handed to the UI in batches, so that its queue stays short however fast the model runs."""

from __future__ import annotations

import time
from typing import Any, Callable

#: Worker updates reach the UI at most this often (seconds): smooth to watch, cheap to draw.
BATCH_INTERVAL = 0.04


class Batcher:
    """Collects a worker's events and hands them over in lists, at most every ``interval`` seconds.

    One message per batch keeps the UI's queue short however fast the model runs; the check is
    made as events arrive, so an event waits at most one model step before it is shown.
    """

    def __init__(self, deliver: Callable[[list], None], interval: float = BATCH_INTERVAL,
                 clock: Callable[[], float] = time.monotonic):
        self.deliver = deliver
        self.interval = interval
        self.clock = clock
        self.items: list = []
        self.last = clock()

    def add(self, item: Any) -> None:
        self.items.append(item)
        if self.clock() - self.last >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self.items:
            items, self.items = self.items, []
            self.deliver(items)
        self.last = self.clock()
