"""Typing a parameter's value: an input under the parameters pane, checked as one types.

The parameters pane opens it (enter, or a digit, on a number's row). The declared range of the
parameter (`ParamSpec.validate(value, ui=True)`) words what is wrong in one line; enter sets a
valid value, escape leaves the old one.
"""

from __future__ import annotations

from typing import Any

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.validation import ValidationResult, Validator
from textual.widget import Widget
from textual.widgets import Input, Static
from textual.widgets.input import Selection

from decoders.core.declarations import ParamSpec
from decoders.core.errors import DecodeError
from tui_decode.state.settings import DRAFT_LAYER_KEY, Knob, Settings

#: The longest text the input takes: any declared number fits in it.
MAX_CHARS = 24


def bounds_text(spec: ParamSpec) -> str:
    """``low..high`` as the parameter is shown."""
    def fmt(x: float | None) -> str:
        return f"{x:g}" if spec.kind == "float" else str(int(x or 0))
    return f"{fmt(spec.low)}..{fmt(spec.high)}"


def typeable(knob: Knob, draft_layers: int = 0) -> bool:
    """Whether ``knob`` takes a typed value: a number (and the early-exit layer when the family
    drafts with its own layers)."""
    if knob.key == DRAFT_LAYER_KEY:
        return draft_layers >= 2
    return knob.spec is not None and knob.spec.kind in ("int", "float")


def parse_value(knob: Knob, text: str, draft_layers: int = 0) -> Any:
    """The value ``text`` gives ``knob``, or a DecodeError saying in one line what is wrong."""
    text = text.strip()
    if knob.key == DRAFT_LAYER_KEY:
        top = draft_layers - 1
        try:
            layer = int(text)
        except ValueError:
            raise DecodeError(f"the draft layer must be a whole number in 1..{top}, got {text!r}") from None
        if not 1 <= layer <= top:
            raise DecodeError(f"the draft layer must be in 1..{top}, got {layer}; type a layer in that range")
        return layer
    spec = knob.spec
    assert spec is not None
    if not text:
        raise DecodeError(f"type a value for {spec.label} in {bounds_text(spec)} (escape keeps the old one)")
    try:
        value: Any = int(text) if spec.kind == "int" else float(text)
    except ValueError:
        noun = "a whole number" if spec.kind == "int" else "a number"
        raise DecodeError(f"{spec.label} must be {noun} in {bounds_text(spec)}, got {text!r}") from None
    return spec.validate(value, ui=True)


class KnobValidator(Validator):
    def __init__(self, editor: ValueEditor) -> None:
        super().__init__()
        self.editor = editor

    def validate(self, value: str) -> ValidationResult:
        knob = self.editor.knob
        if knob is None:
            return self.success()
        try:
            parse_value(knob, value, self.editor.draft_layers)
        except DecodeError as error:
            return self.failure(str(error))
        return self.success()


class ValueInput(Input):
    """The input; escape gives up the edit. Enter sets the value from the key's own handler, in
    the order the keys came (a binding is resolved only once the key has bubbled up to the app,
    after the keys typed behind it); keys that reach it after the edit ended go back to where the
    edit started (the parameters pane)."""

    BINDINGS = [Binding("escape", "cancel_edit", "Keep old value", priority=True)]

    async def _on_key(self, event: events.Key) -> None:
        editor = self.parent
        if isinstance(editor, ValueEditor) and not editor.editing:
            event.stop()
            event.prevent_default()
            if editor.return_to is not None and editor.return_to.is_attached:
                editor.return_to.post_message(events.Key(event.key, event.character))
            return
        if event.key == "enter" and isinstance(editor, ValueEditor):
            event.stop()
            event.prevent_default()
            editor.submit()
            return
        await super()._on_key(event)

    def action_cancel_edit(self) -> None:
        editor = self.parent
        if isinstance(editor, ValueEditor):
            editor.cancel()


class ValueEditor(Vertical):
    """Hidden until a parameter is typed; posts `ValueEditor.Done` when the edit ends."""

    class Done(Message):
        """The edit ended: ``value`` is the new value, or None when it was cancelled."""

        def __init__(self, editor: ValueEditor, key: str, value: Any) -> None:
            super().__init__()
            self.editor = editor
            self.key = key
            self.value = value

        @property
        def control(self) -> ValueEditor:
            return self.editor

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.knob: Knob | None = None
        self.draft_layers = 0
        #: What had focus when the edit started (the parameters pane): it gets the focus back at once.
        self.return_to: Widget | None = None

    def compose(self) -> ComposeResult:
        self.input = ValueInput(validators=[KnobValidator(self)], validate_on=["changed", "submitted"],
                                max_length=MAX_CHARS, compact=True, id="value-input")
        self.reason = Static(id="value-reason")
        yield self.input
        yield self.reason

    @property
    def editing(self) -> bool:
        return self.knob is not None

    def start(self, knob: Knob, settings: Settings, text: str | None = None, draft_layers: int = 0) -> None:
        """Open the input on ``knob``: with ``text`` typed so far, or the current value to edit."""
        self.knob = knob
        self.draft_layers = draft_layers
        current = knob.value(settings)
        if knob.key == DRAFT_LAYER_KEY:
            hint = f"1..{draft_layers - 1}"
        else:
            assert knob.spec is not None
            hint = bounds_text(knob.spec)
        self.border_title = f"{knob.label} ({hint})"
        self.border_subtitle = "enter sets · esc keeps the old value"
        self.input.value = text if text is not None else ("" if current is None else knob.shown(settings))
        self.input.cursor_position = len(self.input.value)
        # enter: the old value selected, so that typing replaces it; a digit: typing goes on after it.
        # Selected here, not on focus: keys typed before the focus arrives go on through `type_more`.
        self.input.select_on_focus = False
        if text is None:
            self.input.selection = Selection(0, len(self.input.value))
        self.say("")
        self.add_class("-editing")
        if self.screen.focused is not self.input:
            self.return_to = self.screen.focused
        self.screen.set_focus(self.input)  # now: the next key already goes to the input
        if self.screen.focused is not self.input:  # not focusable until its styles apply
            self.input.focus()

    def type_more(self, text: str) -> None:
        """Keys that reached the parameters pane before the input had focus: typed as the input
        types them (over the selection, else at the cursor)."""
        selection = self.input.selection
        if selection.is_empty:
            self.input.insert_text_at_cursor(text)
        else:
            self.input.replace(text, *selection)

    def submit(self) -> None:
        """Enter that reached the parameters pane before the input had focus."""
        self._submit(self.input.value)

    def say(self, reason: str) -> None:
        """The one line under the input: what is wrong with the text, or nothing."""
        self.reason.update(reason)
        self.reason.set_class(not reason, "-empty")

    def cancel(self) -> None:
        self._finish(None)

    @on(Input.Changed, "#value-input")
    def changed(self, event: Input.Changed) -> None:
        result = event.validation_result
        self.say("" if result is None or result.is_valid else result.failure_descriptions[0])

    @on(Input.Submitted, "#value-input")
    def submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit(event.value)

    def _submit(self, text: str) -> None:
        knob = self.knob
        if knob is None:
            return
        try:
            value = parse_value(knob, text, self.draft_layers)
        except DecodeError as error:
            self.say(str(error))  # the old value stays; fix the text or press escape
            return
        self._finish(value)

    def _finish(self, value: Any) -> None:
        knob = self.knob
        self.knob = None
        self.remove_class("-editing")
        if knob is not None:
            self.post_message(self.Done(self, knob.key, value))
        if self.return_to is not None and self.return_to.is_attached and self.screen.focused is self.input:
            self.screen.set_focus(self.return_to)  # now: the next key already goes back to the pane
