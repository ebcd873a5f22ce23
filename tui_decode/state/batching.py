"""Worker events handed to the UI in batches, so that its queue stays short however fast the model runs."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

#: Worker updates reach the UI at most this often (seconds): smooth to watch, cheap to draw.
BATCH_INTERVAL = 0.04


class Batcher:
    """Collects a worker's events and hands them over in lists, at most every ``interval`` seconds.

    One message per batch keeps the UI's queue short however fast the model runs; the check is
    made as events arrive, so an event waits at most one model step before it is shown.
    """

    def __init__(self, deliver: Callable[[list], object], interval: float = BATCH_INTERVAL,
                 clock: Callable[[], float] = time.monotonic):
        self.deliver = deliver
        self.interval = interval
        self.clock = clock
        self.items: list = []
        self.last = clock()
        self.auto = True  # False: `add` only collects; the owner flushes (where no clock runs)
        self._lock = threading.Lock()  # `flush_due` may come from another thread than `add`

    def add(self, item: Any) -> None:
        with self._lock:
            self.items.append(item)
        if self.auto and self.due():
            self.flush()

    def due(self) -> bool:
        """Whether something waits and the interval has passed since the last delivery."""
        return bool(self.items) and self.clock() - self.last >= self.interval

    def flush(self) -> None:
        with self._lock:
            items, self.items = self.items, []
        if items:
            self.deliver(items)
        # the interval counts from the end of a delivery: one that waits for the UI to draw
        # (`tui_decode.workers.draw_gate`) must not make the next one due at once
        self.last = self.clock()

    def flush_due(self) -> None:
        """Hand over what waits once the interval has passed, though nothing new came: the last
        event before a long silence (a load step that reports once, then works for seconds) would
        otherwise wait for the next one."""
        if self.items and self.clock() - self.last >= self.interval:
            self.flush()
