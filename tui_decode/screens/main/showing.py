"""Showing one run on the main screen: every pane filled from a `RunResult` (finished, cancelled
or opened), the detail of the iteration selected in the table or chosen in the stream, and the
colours drawn again when the theme changes. A mixin for the main screen (`RunView`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from decoders.core.params import DecodeParams
from decoders.records.files import token_texts_from_ids
from tui_decode.state.loaded_family import helper_description
from tui_decode.state.run_summary import run_title
from tui_decode.state.token_text import run_tokens
from tui_decode.widgets import DetailContext

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.widget import Widget
    from textual.widgets import DataTable

    from decoders.records.run import RunResult
    from tui_decode.state.live_run import LiveRun
    from tui_decode.state.loaded_family import LoadedFamily
    from tui_decode.state.settings import Settings
    from tui_decode.widgets import IterationDetail, IterationTable, ParamsPane, PromptPane, StatsPane, TokenStream


@runtime_checkable
class RunViewHost(Protocol):
    """What showing a run needs from the main screen (and `RunView`'s own members)."""

    result: RunResult | None  # the run shown, once one has finished or been opened
    running: bool
    live: LiveRun | None  # the run streaming, if one is
    loaded: LoadedFamily | None
    settings: Settings
    prompt_pane: PromptPane
    params_pane: ParamsPane
    stream: TokenStream
    table: IterationTable
    detail: IterationDetail
    stats: StatsPane

    def maximize(self, widget: Widget, container: bool = True) -> bool: ...
    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...
    def apply_settings(self, settings: Settings) -> None: ...
    def detail_context(self) -> DetailContext: ...
    def show_detail(self, row: int) -> None: ...


def texts_from_ids(result: RunResult, loaded: LoadedFamily | None) -> str | None:
    """An opened run's token texts made its ids' (`token_texts_from_ids`): decoded again by the
    loaded family's tokenizer when the run was made with that model, else an id the file gives
    two texts shown as the id. None when they agreed, else the line that says what was done."""
    family = loaded.engine.family if loaded is not None else None
    if family is not None and result.family.main == family.main_source:
        return token_texts_from_ids(result, family.display, family.decode, f"{family.label}'s tokenizer")
    return token_texts_from_ids(result)


class RunView:
    """Fills the panes from a run; the selected iteration's detail follows the table."""

    result: RunResult | None  # the host's (`RunViewHost`): declared so that assigning it here does not narrow it

    def show_result(self: RunViewHost, result: RunResult, opened_name: str = "", streamed: bool = False) -> None:
        """Fill every pane from ``result`` (a finished, cancelled or opened run)."""
        if opened_name:
            note = texts_from_ids(result, self.loaded)
            if note:
                self.notify(f"{opened_name}: {note}", title="Token texts", severity="warning", timeout=12)
        self.result = result
        run = result.method
        if not (streamed and self.table.count == len(run.iters) and self.stream.token_count == len(run.ids)):
            self.stream.show_tokens(run_tokens(run))
            self.table.show_iterations(run.iters)
        if streamed and self.table.selected == 0:  # not moved during the run: show the newest iteration
            self.table.select_last()
        state = " (cancelled)" if run.finish == "cancelled" else ""
        self.stream.show_title(f"{run_title(result)}{state}")
        self.stream.marked_iteration = self.table.selected if self.table.count else None
        self.stream.refresh()
        self.stats.show_result(result)
        self.show_detail(self.table.selected)
        if opened_name:
            self.prompt_pane.text = result.prompt
            params = DecodeParams.from_json(result.params) if result.params else self.settings.params
            self.apply_settings(self.settings.replace(params=params))
            if self.loaded is None:
                self.prompt_pane.show_family(result.family, note="saved run")
                self.params_pane.helper_label = helper_description(result.family)

    def detail_context(self: RunViewHost) -> DetailContext:
        result = self.result if not self.running else None
        if result is not None:
            return DetailContext(method=result.method.method, prompt=result.prompt,
                                 prompt_tokens=len(result.prompt_ids), output_tokens=list(result.method.tokens))
        live = self.live
        if live is None:
            return DetailContext(method=self.settings.params.method)
        return DetailContext(method=live.params.method, prompt=live.prompt, prompt_tokens=None,
                             output_tokens=list(live.output_tokens))

    def show_detail(self: RunViewHost, row: int) -> None:
        """The detail of iteration ``row`` of the table (none past its end)."""
        iterations = self.table.iterations
        if 0 <= row < len(iterations):
            self.detail.show(iterations[row], self.detail_context())
        else:
            self.detail.show(None, DetailContext())

    def redraw_run(self: RunViewHost, theme: Any = None) -> None:
        """Table rows and figures keep the colours they were drawn with: draw them again (a new theme)."""
        if self.running:
            return
        row = self.table.selected
        self.table.show_iterations(list(self.table.iterations))
        self.table.select_iteration(row)
        self.show_detail(row)
        if self.result is not None:
            self.stats.show_result(self.result)

    def on_data_table_row_highlighted(self: RunViewHost, event: DataTable.RowHighlighted) -> None:
        if event.data_table is not self.table:
            return
        row = self.table.first + event.cursor_row  # the table shows a window of the iterations
        self.show_detail(row)
        if not (self.running and row == self.table.count - 1):  # following a live run: the stream marks
            self.stream.mark_iteration(row)                          # its newest iteration itself

    def on_data_table_row_selected(self: RunViewHost, event: DataTable.RowSelected) -> None:
        if event.data_table is not self.table:
            return
        self.maximize(self.detail, container=False)
        self.detail.focus()

    def on_token_stream_iteration_chosen(self: RunViewHost, event: TokenStream.IterationChosen) -> None:
        self.table.select_iteration(event.iteration)
