"""Building a quantized self-draft beside the loaded main model, in a thread worker.

A mixin for the main screen: when the draft row lands on a self-draft kind ("int4") that the
engine has not built yet, `ensure_draft` starts the build and says so in the status line; the
main model stays loaded and in use. A build that cannot be done (a shape the kernel cannot take,
too little memory) is one line in a notification, and the draft row goes back to what drafted
before. The build holds the screen's decode lock, so a run started meanwhile waits for it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from textual import work

from decoders.backends.capabilities import OwnBytes
from decoders.core.params import METHOD_NAMES
from decoders.models.drafts import Draft, EarlyExit
from decoders.models.memory import format_bytes
from tui_decode.workers.decode import in_daemon_thread
from tui_decode.workers.messages import DraftBuilt, DraftFailed

if TYPE_CHECKING:
    from textual.message import Message

    from tui_decode.state.loaded_family import LoadedFamily
    from tui_decode.state.settings import Settings
    from tui_decode.widgets import StatusLine


@runtime_checkable
class DraftHost(Protocol):
    """What `DraftBuildWorker` needs from the screen that hosts it (and its own members)."""

    _decode_lock: threading.Lock  # held while building: a run started meanwhile waits
    loaded: LoadedFamily | None
    running: bool
    settings: Settings
    status: StatusLine
    building_draft: Draft | None
    _building_for: LoadedFamily | None
    draft_thread: threading.Thread | None

    def post_message(self, message: Message) -> bool: ...
    def report_error(self, message: str) -> None: ...
    def apply_settings(self, settings: Settings) -> None: ...
    def build_draft_in_background(self, loaded: LoadedFamily, draft: Draft) -> object: ...  # the worker
    def _build_ended(self, event: DraftBuilt | DraftFailed) -> None: ...


class DraftBuildWorker:
    """Hosts the worker that builds a self-draft for the loaded family."""

    _decode_lock: threading.Lock
    building_draft: Draft | None = None  # the draft being built, if any
    _building_for: LoadedFamily | None = None  # and for which loaded family
    draft_thread: threading.Thread | None = None

    def ensure_draft(self: DraftHost, settings: Settings) -> None:
        """Start building the self-draft ``settings`` ask for, unless it is built or building (an
        early exit costs nothing: it is built when a run asks for it)."""
        loaded = self.loaded
        draft = settings.draft
        if loaded is None or draft is None or isinstance(draft, EarlyExit) or loaded.engine.has_draft(draft):
            return
        if draft == self.building_draft and loaded is self._building_for:
            return
        self.building_draft, self._building_for = draft, loaded
        if not self.running:
            self.status.set(f"building the {draft.kind} self-draft of {loaded.label} (the main model stays loaded) …",
                            "busy")
        self.build_draft_in_background(loaded, draft)

    @work(thread=True, exclusive=True, group="draft", exit_on_error=False)
    def build_draft_in_background(self: DraftHost, loaded: LoadedFamily, draft: Draft) -> None:
        """Build in a daemon thread and wait for it here, so that quitting never waits for a build."""
        def build() -> tuple[int, float]:
            start = time.perf_counter()
            with self._decode_lock:
                backend = loaded.engine.build_draft(draft)
            nbytes = int((backend.own_bytes if isinstance(backend, OwnBytes) else 0) or backend.weight_bytes or 0)
            return nbytes, time.perf_counter() - start

        outcome = in_daemon_thread(build, "tui-decode-draft", lambda thread: setattr(self, "draft_thread", thread))
        if "value" in outcome:
            self.post_message(DraftBuilt(loaded, draft, *outcome["value"]))
        elif "error" in outcome:
            self.post_message(DraftFailed(loaded, draft, outcome["error"]))

    def _build_ended(self: DraftHost, event: DraftBuilt | DraftFailed) -> None:
        if event.loaded is self._building_for and event.draft == self.building_draft:
            self.building_draft = self._building_for = None

    def on_draft_built(self: DraftHost, event: DraftBuilt) -> None:
        self._build_ended(event)
        if event.loaded is not self.loaded or self.running:
            return
        method = METHOD_NAMES[self.settings.params.method]
        self.status.set(f"{event.draft.kind} self-draft ready: {format_bytes(event.nbytes)} beside the main model, "
                        f"built in {event.seconds:.1f} s; ctrl+r runs {method}", "done")

    def on_draft_failed(self: DraftHost, event: DraftFailed) -> None:
        self._build_ended(event)
        if event.loaded is not self.loaded:
            return
        self.report_error(event.error)
        if self.settings.draft == event.draft:  # back to the draft the family loaded with
            start = event.loaded.start_draft()["draft"]
            self.apply_settings(self.settings.replace(draft=start if start != event.draft else None))
