"""The method and its parameters, each with its value, changed from the keyboard.

Only the rows that matter for the chosen method are shown. ↑/↓ pick a row, ←/→ (or -/+) change
it; on a number, enter or a digit opens an input to type the value (`ValueEditor`). The hint under
the rows says what the picked parameter does.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from tui_decode.state.settings import DraftOptions, Knob, Settings, knobs_for
from tui_decode.widgets.styles import component_style
from tui_decode.widgets.value_editor import ValueEditor, typeable

TYPING_STARTS = frozenset("0123456789.")


class ParamsPane(Widget, can_focus=True):
    """Rows of parameter values; posts `ParamsPane.Changed` when a key changes one."""

    BORDER_TITLE = "Parameters"
    COMPONENT_CLASSES = {"params-pane--selected", "params-pane--unused", "params-pane--value", "params-pane--hint"}
    BINDINGS = [
        Binding("up", "pick(-1)", "Row ↑", show=False),
        Binding("down", "pick(1)", "Row ↓", show=False),
        Binding("left,minus", "change(-1)", "Change", key_display="←", group=Binding.Group("Change", compact=True)),
        Binding("right,plus,equals_sign", "change(1)", "Change", key_display="→",
                group=Binding.Group("Change", compact=True)),
        Binding("enter", "type_value", "Type", tooltip="Type the value (a number), or step it (a choice)"),
    ]

    settings: reactive[Settings] = reactive(Settings, always_update=True, layout=True)  # rows vary by method
    draft_options: reactive[DraftOptions] = reactive(DraftOptions)  # what may draft: helper, layers, int4
    helper_label: reactive[str] = reactive("none")
    selected: reactive[int] = reactive(0)
    #: The input a typed value goes to (the screen attaches it); opened from the key's own handler.
    editor: ValueEditor | None = None

    class Changed(Message):
        """A key changed the settings."""

        def __init__(self, pane: ParamsPane, settings: Settings) -> None:
            super().__init__()
            self.pane = pane
            self.settings = settings

        @property
        def control(self) -> ParamsPane:
            return self.pane

    class EditRequested(Message):
        """Enter or a digit on a number's row: type its value (``text``: typed so far, or None)."""

        def __init__(self, pane: ParamsPane, knob: Knob, text: str | None) -> None:
            super().__init__()
            self.pane = pane
            self.knob = knob
            self.text = text

        @property
        def control(self) -> ParamsPane:
            return self.pane

    @property
    def draft_layers(self) -> int:
        """The main model's layer count when it may draft by early exit, else 0."""
        return self.draft_options.layers

    @property
    def rows(self) -> list[Knob]:
        return knobs_for(self.settings.params.method)

    @property
    def selected_knob(self) -> Knob:
        rows = self.rows
        return rows[min(self.selected, len(rows) - 1)]

    def select_key(self, key: str) -> None:
        """Put the row cursor on the parameter ``key`` (when the method shows it)."""
        for n, knob in enumerate(self.rows):
            if knob.key == key:
                self.selected = n

    def action_pick(self, delta: int) -> None:
        self.selected = (min(self.selected, len(self.rows) - 1) + delta) % len(self.rows)

    def action_type_value(self) -> None:
        knob = self.selected_knob
        if self.editor is not None and self.editor.editing:  # typed fast: the input had no focus yet
            self.editor.submit()
        elif typeable(knob, self.draft_layers):
            self._edit(knob, None)
        else:
            self.action_change(1)

    def on_key(self, event: events.Key) -> None:
        """A digit (or a decimal point) on a number's row starts typing its value; keys typed
        before the input has focus (a burst, or keys a few milliseconds apart) go on into it.

        Enter is handled here, in the order the keys came, not by its binding: Textual resolves a
        binding once the key has bubbled up to the app, against whatever has focus by then (the
        input, after a digit typed right behind the enter)."""
        editor = self.editor if self.editor is not None and self.editor.editing else None
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.action_type_value()
        elif editor is not None and (event.is_printable or event.key == "backspace"):
            event.stop()
            event.prevent_default()
            if event.key == "backspace":
                editor.input.action_delete_left()
            else:
                assert event.character is not None
                editor.type_more(event.character)
        elif event.character and event.character in TYPING_STARTS and typeable(self.selected_knob, self.draft_layers):
            event.stop()
            event.prevent_default()
            self._edit(self.selected_knob, event.character)

    def _edit(self, knob: Knob, text: str | None) -> None:
        """Open the value editor on ``knob`` at once (not through a message, which keys typed right
        after would overtake), or ask the screen to when none is attached."""
        if self.editor is None:
            self.post_message(self.EditRequested(self, knob, text))
        else:
            self.editor.start(knob, self.settings, text, self.draft_layers)

    def action_change(self, direction: int) -> None:
        knob = self.selected_knob
        if knob.key == "draft_layer" and len(self.draft_options.choices()) < 2:
            self.notify("This family drafts with its own helper model; pick another family (f) to change it.",
                        severity="warning")
            return
        changed = knob.step(self.settings, direction, self.draft_options)
        if changed != self.settings:
            key = knob.key
            self.settings = changed
            self.select_key(key)  # the method's rows may have changed around it
            self.post_message(self.Changed(self, changed))

    def render(self) -> RenderableType:
        settings = self.settings
        greedy = settings.params.mode == "greedy"
        selected_style = component_style(self, "params-pane--selected")
        unused_style = component_style(self, "params-pane--unused")
        value_style = component_style(self, "params-pane--value")
        grid = Table.grid(padding=(0, 1), expand=True)
        grid.add_column(width=16, no_wrap=True)
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        rows = self.rows
        chosen = min(self.selected, len(rows) - 1)
        for n, knob in enumerate(rows):
            shown = knob.shown(settings)
            style = value_style
            if knob.key == "draft_layer" and not settings.self_draft and not self.draft_layers:
                choices = len(self.draft_options.choices()) > 1
                shown, style = self.helper_label, value_style if choices else unused_style
            elif knob.key == "temperature" and greedy:
                style = unused_style
            elif knob.key == "seed" and not settings.params.method_def.reads_seed(settings.params):
                style = unused_style
            mark = "▸ " if n == chosen else "  "
            label = Text(mark + knob.label)
            value = Text(shown, style=style)
            if n == chosen and self.has_focus:
                label.stylize(selected_style)
                value.stylize(selected_style)
            grid.add_row(label, value)
        hint = Text(rows[chosen].hint, style=component_style(self, "params-pane--hint"),
                    no_wrap=True, overflow="ellipsis")
        return Group(grid, hint)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
