"""The prompt being decoded, whether the chat template wraps it, and the models in use."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Static, TextArea

from tui_decode.widgets.styles import component_style


class PromptEditor(TextArea):
    """The prompt text. Typing here never triggers the app's one-letter keys; escape or tab
    leaves it (e comes back)."""

    BINDINGS = [Binding("escape", "leave", "Leave prompt")]

    def action_leave(self) -> None:
        self.screen.focus_next()


class PromptPane(Vertical):
    """Editable prompt, the family with its device and dtype, and (in the bottom border) whether
    the chat template wraps the prompt."""

    BORDER_TITLE = "Prompt"
    COMPONENT_CLASSES = {"prompt-pane--label"}

    def __init__(self, prompt: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._initial_prompt = prompt
        self._chat_template = True
        self._family: dict[str, Any] = {}
        self._family_note = ""
        self._threads: int | None = None

    def compose(self) -> ComposeResult:
        self.editor = PromptEditor(self._initial_prompt, id="prompt-editor", soft_wrap=True, tab_behavior="focus",
                                   show_line_numbers=False)
        self.info = Static(id="prompt-info")
        yield self.editor
        yield self.info

    def on_mount(self) -> None:
        self._refresh_info()

    @property
    def text(self) -> str:
        return self.editor.text

    @text.setter
    def text(self, value: str) -> None:
        self.editor.text = value

    def show_chat_template(self, on: bool) -> None:
        self._chat_template = on
        self._refresh_info()

    def show_family(self, described: dict[str, Any], note: str = "", threads: int | None = None) -> None:
        """``described`` as `Family.describe()` gives it; ``note`` says e.g. that it is loading;
        ``threads`` is the number of torch threads the runs use."""
        self._family = dict(described)
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
        if family:
            info.append(str(family.get("label") or family.get("main") or "?"))
            where = " · ".join(str(family[k]) for k in ("device", "dtype") if family.get(k))
            if self._threads and family.get("device") == "cpu":
                where += f" · {self._threads} thread{'s' if self._threads > 1 else ''}"
            if where:
                info.append(f" · {where}", style="dim")
        else:
            info.append("none loaded", style="dim")
        if self._family_note:
            info.append(f" ({self._family_note})", style="dim")
        self.info.update(info)
