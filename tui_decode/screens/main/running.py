"""A run on the main screen from ctrl+r to its result: the decode worker's messages
(`tui_decode.workers.messages`) land here, the panes and the status line follow the run (its
state while it streams lives in a `LiveRun`), and escape cancels it. A mixin for the main screen
(`RunLifecycle`).

After the method's last token the engine may measure the verify-cost curve T(k) (a phase of its
own, "curve": a second or two on a small CPU, much longer on a loaded machine). The run is done by
then: `measuring` is set, the footer drops escape (there is nothing left to cancel), the status
line says what is measured and how far it has got, and a ctrl+r meanwhile starts once the result
is in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from decoders.analysis.verdict import headline
from tui_decode.state.live_run import LiveRun
from tui_decode.state.settings import draft_error, input_error
from tui_decode.widgets import DetailContext
from tui_decode.widgets.stats_pane import speed_text as speed_words

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from decoders.models.family import FamilySpec
    from decoders.records.run import RunResult
    from tui_decode.state.loaded_family import LoadedFamily
    from tui_decode.state.run_history import RunHistory
    from tui_decode.state.settings import Settings
    from tui_decode.widgets import IterationDetail, IterationTable, PromptPane, StatsPane, StatusLine, TokenStream
    from tui_decode.workers.messages import RunBatch, RunFailed, RunFinished, RunPhase, RunStopped


@runtime_checkable
class RunHost(Protocol):
    """What a run needs from the main screen (and `RunLifecycle`'s own members)."""

    running: bool  # from ctrl+r until the result (or the failure) is in
    measuring: bool  # the run's tokens are all in; T(k) is being measured
    run_after_load: bool  # ctrl+r came before the model: run once it has loaded
    run_after_measure: bool  # ctrl+r came while T(k) was measured: run once the result is in
    loading_family: bool
    @property
    def narrow(self) -> bool: ...  # one page at a time (the layout's)
    spec: FamilySpec | None
    loaded: LoadedFamily | None
    result: RunResult | None
    live: LiveRun | None
    settings: Settings
    history: RunHistory
    prompt_pane: PromptPane
    stream: TokenStream
    table: IterationTable
    detail: IterationDetail
    stats: StatsPane
    status: StatusLine

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...
    def report_error(self, message: str) -> None: ...
    def start_loading(self, spec: FamilySpec) -> None: ...
    def show_page(self, page: str) -> None: ...
    def show_result(self, result: RunResult, opened_name: str = "", streamed: bool = False) -> None: ...
    def hurry_threads(self) -> None: ...
    def restore_threads(self) -> None: ...
    def cancel_decode(self) -> None: ...
    def decode_in_background(self, loaded: LoadedFamily, prompt: str, settings: Settings) -> Any: ...
    def action_run(self) -> None: ...
    def _run_ended(self) -> None: ...
    def _flush_slow_panes(self) -> None: ...


class RunLifecycle:
    """ctrl+r runs, escape cancels; the worker's messages drawn."""

    live: LiveRun | None  # the host's (`RunHost`): declared so that assigning it here does not narrow it

    run_after_measure: bool = False

    def action_run(self: RunHost) -> None:
        if self.running:
            if self.measuring:
                self.run_after_measure = True
                self.notify("This run is done; the next starts as soon as T(k) is measured.")
            else:
                self.notify("A run is already going; escape cancels it.", severity="warning")
            return
        prompt, settings = self.prompt_pane.text, self.settings
        error = input_error(prompt, settings)
        if error is not None:
            self.report_error(error)
            return
        if self.loaded is not None:
            error = draft_error(settings, self.loaded.draft_options(), self.loaded.label)
            if error is not None:
                self.report_error(error)
                return
        if self.loaded is None:
            if self.spec is None:
                self.report_error("no model family is loaded; press f to pick one")
                return
            self.run_after_load = True
            if not self.loading_family:
                self.start_loading(self.spec)
            else:
                self.notify("The run starts as soon as the model has loaded.")
            return
        self.running = True
        self.hurry_threads()
        self.live = live = LiveRun(settings.params, prompt)
        self.status.set(live.status, "busy", 0.0)
        self.decode_in_background(self.loaded, prompt, settings)
        if self.narrow:  # one page at a time: follow the run on the output page
            self.show_page("output")
            self.stream.focus()

    def action_cancel(self: RunHost) -> None:
        if self.run_after_load:
            self.run_after_load = False
            self.status.set("the run waiting for the model is cancelled; the model keeps loading", "cancelled")
            return
        if self.running and not self.measuring:
            self.cancel_decode()
            self.status.set("cancelling at the next iteration …", "busy")

    def _run_ended(self: RunHost) -> None:
        self.running = False
        self.measuring = False
        self.restore_threads()

    def on_run_phase(self: RunHost, event: RunPhase) -> None:
        live = self.live
        if live is None:
            return
        live.enter(event.phase)
        if live.measuring:  # every token is in: the run is done but for its T(k)
            self.measuring = True
            self._flush_slow_panes()
            self.stream.show_title(f"{live.method_label} (done; measuring T(k))")
            self.stats.show_live(live.figures(), "measuring T(k), the verify cost by width")
        elif live.phase == "method":
            self.stream.clear()
            self.table.clear_iterations()
            self.detail.show(None, DetailContext())
            self.stream.show_title(f"{live.method_label} (running)")
            self.stats.show_live(live.figures(), "running")
        self.status.set(live.status, "busy", live.fraction)

    def run_tick(self: RunHost) -> None:
        """While a phase prefills nothing arrives from the worker: count the seconds here."""
        if self.running and self.live is not None and self.live.prefilling:
            self.status.set(self.live.status, "busy", None)

    def on_run_batch(self: RunHost, event: RunBatch) -> None:
        live = self.live
        if live is None:
            return
        iterations = live.add(event.events)
        if iterations:
            self.stream.append_iterations(iterations)
            if live.slow_panes_due():
                self._flush_slow_panes()
        self.status.set(live.status, "busy", live.fraction)

    def _flush_slow_panes(self: RunHost) -> None:
        """Bring the iteration table and the live figures up to date with the stream."""
        live = self.live
        if live is None:
            return
        rows = live.take_rows()
        if rows:
            self.table.add_iterations(rows)
        if self.running and not self.measuring:
            self.stats.show_live(live.figures(), "running")

    def on_run_finished(self: RunHost, event: RunFinished) -> None:
        queued = self.run_after_measure
        self.run_after_measure = False
        self._run_ended()
        self._flush_slow_panes()
        result = event.result
        self.history.record(result)
        seconds = self.live.elapsed() if self.live is not None else 0.0
        self.show_result(result, streamed=True)
        summary = result.summary
        h = headline(summary)  # the figure, spread and verdict the statistics pane and the sentence give
        speed_text = ("vs autoregressive: " + speed_words(h.speedup, h.spread, h.verdict)[0]
                      if h.speedup is not None else "no timing")
        if result.method.finish == "cancelled":
            self.status.set(f"cancelled after {summary.tokens} tokens ({seconds:.1f} s); the partial run stays: "
                            f"{speed_text}", "cancelled")
        else:
            self.status.set(f"done in {seconds:.1f} s: {summary.tokens} tokens, {speed_text}", "done")
        if event.memory_error:  # the run stands; its response is in the memory, not in its file
            self.notify(event.memory_error, title="Suffix memory not saved", severity="error", timeout=10,
                        markup=False)
        if queued:
            self.action_run()

    def on_run_stopped(self: RunHost, event: RunStopped) -> None:
        self.run_after_measure = False
        self._run_ended()
        kept = "the run shown before stays" if self.result is not None else "no run is shown yet (ctrl+r runs)"
        self.status.set(f"cancelled during the baseline; {kept}", "cancelled")

    def on_run_failed(self: RunHost, event: RunFailed) -> None:
        self.run_after_measure = False
        self._run_ended()
        self._flush_slow_panes()
        self.report_error(event.error)
        if self.result is not None and self.live is not None and self.live.views_cleared:
            self.show_result(self.result)  # the failed run had cleared the views: bring the last run back
