"""The prompt being decoded, its length in tokens, whether the chat template wraps it, and the
models in use.

The token count comes from the loaded family's tokenizer, in a thread worker, a moment after the
typing stops (a long prompt costs milliseconds to tokenize; typing never waits for it)."""

from __future__ import annotations

from typing import Any, Callable

from rich.segment import Segment
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Static, TextArea
from textual.widgets.text_area import EditResult, Location

from decoders.records.bounds import MAX_PROMPT
from decoders.records.family_info import FamilyInfo
from tui_decode.state.token_text import bidi_controls, drawn_in_place
from tui_decode.widgets.styles import component_style

#: Seconds after the last change before the prompt is tokenized again.
COUNT_DELAY = 0.3
#: How a loaded family counts a prompt's tokens: (text, chat template on) -> tokens.
TokenCounter = Callable[[str, bool], int]



class PromptEditor(TextArea):
    """The prompt text. Typing here never triggers the app's one-letter keys; escape or tab
    leaves it (e comes back). It holds at most `MAX_PROMPT` characters, as a prompt file may: a
    paste or a burst of keys that would pass it is cut there, and said once."""

    BINDINGS = [Binding("escape", "leave", "Leave prompt")]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cut = False  # the last insert was cut at the bound (and said so): the next is cut quietly

    def _replace_via_keyboard(self, insert: str, start: Location, end: Location) -> EditResult | None:
        """Textual's (8.2.8, pinned) every typed and pasted insert, cut at the prompt's bound."""
        if insert:
            top, bottom = sorted((start, end))
            room = MAX_PROMPT - (self._length() - len(self.get_text_range(top, bottom)))
            if len(insert) > room:
                kept = max(room, 0)
                if not self._cut:
                    self.app.notify(f"The prompt holds at most {MAX_PROMPT:,} characters: {len(insert):,} "
                                    f"pasted or typed, {kept:,} of them kept.", title="Prompt cut",
                                    severity="warning")
                self._cut = True
                insert = insert[:kept]
                if not insert and top == bottom:
                    return None
            else:
                self._cut = False
        return super()._replace_via_keyboard(insert, start, end)

    def _length(self) -> int:
        """Characters in the prompt (its lines and the line breaks between them)."""
        document = self.document
        lines = document.line_count
        return sum(len(document[row]) for row in range(lines)) + (lines - 1) * len(document.newline)

    def action_leave(self) -> None:
        self.screen.focus_next()

    def render_line(self, y: int) -> Strip:
        """The line as TextArea draws it, a control character in the prompt (an opened run's, a
        pasted one's) drawn as its picture: sent as it is, an ESC sequence acts on the terminal.
        A bidirectional control is left out (the title counts them): sent, it reordered the line or
        took a cell the wrap had not given it. The prompt itself keeps them."""
        strip = super().render_line(y)
        if not any(drawn_in_place(segment.text) is not segment.text for segment in strip):
            return strip
        shown = Strip([Segment(drawn_in_place(s.text), s.style, s.control) for s in strip])
        return shown.crop(0, strip.cell_length)


class PromptPane(Vertical):
    """Editable prompt, the family with its device and dtype, and (in the bottom border) whether
    the chat template wraps the prompt."""

    BORDER_TITLE = "Prompt"
    COMPONENT_CLASSES = {"prompt-pane--label"}

    def __init__(self, prompt: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._initial_prompt = prompt
        self._chat_template = True
        self._family: FamilyInfo | None = None
        self._family_note = ""
        self._threads: int | None = None
        self._counter: TokenCounter | None = None
        self._count_timer: Timer | None = None
        self.token_count: int | None = None  # of the prompt as the run will see it (None: not known)

    def compose(self) -> ComposeResult:
        self.editor = PromptEditor(self._initial_prompt, id="prompt-editor", soft_wrap=True, tab_behavior="focus",
                                   show_line_numbers=False)
        self.info = Static(id="prompt-info")
        yield self.editor
        yield self.info

    def on_mount(self) -> None:
        self._refresh_info()
        self._refresh_title()  # a prompt given at the start may hold bidi controls

    @property
    def text(self) -> str:
        return self.editor.text

    @text.setter
    def text(self, value: str) -> None:
        self.editor.text = value

    def show_chat_template(self, on: bool) -> None:
        if on != self._chat_template:
            self._chat_template = on
            self.recount()
        self._refresh_info()

    # -- the token count -------------------------------------------------------------------------
    def set_counter(self, counter: TokenCounter | None) -> None:
        """Count with ``counter`` from now on (a family loaded), or stop counting (None)."""
        self._counter = counter
        self.recount()

    @on(TextArea.Changed, "#prompt-editor")
    def recount(self) -> None:
        """Count the prompt's tokens again once the typing pauses."""
        if self._count_timer is not None:
            self._count_timer.stop()
        if self._counter is None:
            self.token_count = None
            self._refresh_title()
            return
        self._refresh_title(counting=True)
        self._count_timer = self.set_timer(COUNT_DELAY, lambda: self._count(self.text, self._chat_template))

    @work(thread=True, exclusive=True, group="prompt-count", exit_on_error=False)
    def _count(self, text: str, chat_template: bool) -> None:
        counter = self._counter
        if counter is None:
            return
        try:
            count: int | None = counter(text, chat_template)
        except Exception:  # noqa: BLE001 - a count is a hint; the run itself reports a bad prompt
            count = None
        self.app.call_from_thread(self._counted, text, chat_template, count)

    def _counted(self, text: str, chat_template: bool, count: int | None) -> None:
        if text == self.text and chat_template == self._chat_template:  # not overtaken by typing
            self.token_count = count
            self._refresh_title()

    def _refresh_title(self, counting: bool = False) -> None:
        if counting:
            title = f"{self.BORDER_TITLE} · counting tokens …"
        elif self.token_count is None:
            title = self.BORDER_TITLE
        else:
            title = f"{self.BORDER_TITLE} · {self.token_count} token{'s' * (self.token_count != 1)}"
        hidden = bidi_controls(self.editor.text) if self.is_mounted else 0  # (composed by then)
        if hidden:  # not drawn (see PromptEditor.render_line), yet part of the prompt
            title += f" · {hidden} bidi control{'s' * (hidden != 1)} not shown"
        self.border_title = title

    def show_family(self, described: FamilyInfo | None, note: str = "", threads: int | None = None) -> None:
        """``described`` as `Family.describe()` gives it (None, or a saved run's empty one: no
        model); ``note`` says e.g. that it is loading; ``threads`` is the number of torch threads
        the runs use."""
        self._family = described if described != FamilyInfo() else None
        self._family_note = note
        self._threads = threads
        self._refresh_info()

    def _refresh_info(self) -> None:
        if not self.is_mounted:
            return
        label = component_style(self, "prompt-pane--label")
        state = "[$text-success]on[/]" if self._chat_template else "[$text-warning]off: raw text[/]"
        self.border_subtitle = f"template {state} (t) · e edits · esc leaves"
        info = Text()
        info.append("model ", style=label)
        family = self._family
        if family is not None:
            info.append(str(family.label or family.main or "?"))
            where = " · ".join(str(value) for value in (family.device, family.dtype) if value)
            if self._threads and family.device == "cpu":
                where += f" · {self._threads} thread{'s' if self._threads > 1 else ''}"
            if where:
                info.append(f" · {where}", style="dim")
        else:
            info.append("none loaded", style="dim")
        if self._family_note:
            info.append(f" ({self._family_note})", style="dim")
        self.info.update(info)
