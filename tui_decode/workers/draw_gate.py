"""No UI work on a timed clock: a worker hands each message to the UI and waits until it is drawn.

The engine times each forward with a clock that stops while the consumer holds a yielded
iteration (`decoders.methods.shared.common.RunBuilder.yielding`), but a UI thread that draws
*while the next forward runs* still lands on that forward's clock: through the interpreter lock
(the UI's Python holds it between the decode thread's torch ops), and through the core itself
when both share one. In the interleaved pairing the baseline steps right after each method
iteration, so the draws fell on the baseline's clock and autoregressive decoding read 1.24-1.62x
faster than itself in a live run (issue 36).

`DrawGate.post` posts a message to the screen, then waits, with the engine suspended between
two timed steps, until the screen has handled it and refreshed twice (a handler's own follow-up
work, a scroll to the end say, lands in the second refresh), and until the terminal writer has
taken every frame. Only then does the next timed step begin, on an idle interface. The wait is
bounded (`WAIT_LIMIT`) and polls the run's cancel test, so a UI that is closing never holds a run.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from textual.message import Message
    from textual.message_pump import MessagePump

#: The longest a worker waits for one message to be drawn (seconds): a UI that stopped processing
#: (closing, or a test harness with no screen) never holds a run longer than this per message.
WAIT_LIMIT = 2.0
#: How often the wait looks at the cancel test and the terminal writer (seconds).
POLL = 0.002
#: After the writer has taken the last frame, the terminal still parses it (another process, on
#: the same core on a one-core run): this long is left to it before the next timed step (seconds).
SETTLE = 0.002
#: The longest the UI's event loop is held between two hand-overs (seconds): a run that stops
#: without releasing it (a bug, a stuck forward) never freezes the interface longer than this.
HOLD_LIMIT = 0.5


def _writer_idle(host: MessagePump) -> bool:
    """Whether the terminal writer thread has no frame waiting (True where there is none, as in
    headless tests). Textual keeps it private: `textual.drivers._writer_thread.WriterThread`."""
    driver = getattr(host.app, "_driver", None)
    writer = getattr(driver, "_writer_thread", None)
    queue = getattr(writer, "_queue", None)
    return queue is None or queue.qsize() == 0


class DrawGate:
    """Posts a worker's messages to ``host`` and returns once they are drawn (or cancelled, or
    after `WAIT_LIMIT`). ``waited`` adds up the seconds spent waiting (off every timed clock)."""

    def __init__(self, host: MessagePump, cancelled: Callable[[], bool] = lambda: False,
                 limit: float = WAIT_LIMIT, clock: Callable[[], float] = time.monotonic):
        self.host = host
        self.cancelled = cancelled
        self.limit = limit
        self.clock = clock
        self.waited = 0.0
        self.timeouts = 0  # messages not confirmed drawn within the limit
        self._resume: threading.Event | None = None
        #: Hold the UI's loop after each post until the next (`hold`): set for a timed run.
        self.holding = False

    def hold(self) -> bool:
        """Stop the UI's event loop until `release` (or the next `post`): no timer, animation,
        key handler or draw runs while the next steps are timed. Returns once the loop is held
        (False if it could not be within the limit, or a cancel came first).

        Drawing before each timed step was not enough on two cores: the UI's own timers and the
        work a draw leaves behind ran on the other core and took the interpreter lock between the
        decode thread's torch ops, so autoregressive decoding read 0.90x of itself at 120x40
        (5/10 runs inside their spread). Keys pressed meanwhile wait in the input queue until
        the next hand-over, at most a batch interval plus a step away."""
        self.release()
        held, resume = threading.Event(), threading.Event()

        def block() -> None:
            held.set()
            resume.wait(HOLD_LIMIT)

        if not self.host.call_later(block):
            return False
        self._resume = resume
        deadline = self.clock() + self.limit
        while not held.wait(POLL):
            if self.cancelled() or self.clock() > deadline:
                self.release()
                return False
        return True

    def release(self) -> None:
        """Let the UI's event loop run again (nothing if it is not held)."""
        if self._resume is not None:
            self._resume.set()
            self._resume = None

    def post(self, message: Message) -> bool:
        """Post ``message`` and wait until it has been drawn. False if the host refused it."""
        self.release()
        if not self.host.post_message(message):
            return False
        self.wait_drawn()
        if self.holding:
            self.hold()
        return True

    def wait_drawn(self) -> None:
        """Wait until everything posted to the host so far has been handled and drawn."""
        drawn = threading.Event()
        host = self.host
        # the second refresh: work a handler left for after the first (call_after_refresh, scrolls)
        if not host.call_after_refresh(lambda: host.call_after_refresh(drawn.set)):
            return
        start = self.clock()
        deadline = start + self.limit
        while not drawn.wait(POLL):
            if self.cancelled():
                return
            if self.clock() > deadline:
                self.timeouts += 1
                self.waited += self.clock() - start
                return
        while not _writer_idle(host) and self.clock() < deadline and not self.cancelled():
            time.sleep(POLL)
        time.sleep(SETTLE)
        self.waited += self.clock() - start
