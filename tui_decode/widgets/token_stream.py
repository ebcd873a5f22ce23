"""The method's output as it grows: the real text, each token coloured by how it was emitted.

Drawn with the line API (one `Strip` per wrapped line) rather than a widget per token, so that a
run of hundreds of tokens costs one layout per batch. Wrapping happens at token boundaries (tokens
mostly start with their space), so words stay whole and each token keeps one colour.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.markup import escape
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from decoders.records.kinds import EMIT_KINDS
from decoders.records.run import Iteration
from tui_decode.state.token_text import real_text, shown_controls
from tui_decode.widgets.styles import component_style

KIND_LABELS = {"acc": "accepted draft", "fix": "fixed", "bonus": "bonus", "ar": "autoregressive"}
#: Each kind's colour, as app.tcss gives it to the stream's component classes. None of them is the
#: accent that pane titles and parameter values use: "fixed" (the target's own token where a draft
#: was rejected) takes the colour the iteration table and detail give rejected drafts.
KIND_COLOURS = {"acc": "$text-success", "fix": "$text-error", "bonus": "$text-primary", "ar": "$foreground"}


def legend_markup() -> str:
    """The colour legend, as Textual content markup for a border subtitle."""
    return " ".join(f"[{KIND_COLOURS[k]}]■ {KIND_LABELS[k]}[/]" for k in EMIT_KINDS)


@dataclass
class Piece:
    """Part of one token on one screen line (a token with newlines spans lines)."""

    token: int
    text: str
    width: int
    x: int


class TokenStream(ScrollView, can_focus=True):
    """Tokens coloured by kind; a cursor moves token by token and selects the token's iteration."""

    BORDER_TITLE = "Output"
    _run_label: str | None = None  # the shown run's label (`show_title`); None: titled by its owner
    BORDER_SUBTITLE = legend_markup()
    COMPONENT_CLASSES = {
        "token-stream--acc",
        "token-stream--fix",
        "token-stream--bonus",
        "token-stream--ar",
        "token-stream--space",
        "token-stream--current",
        "token-stream--cursor",
    }
    BINDINGS = [
        Binding("left", "move(-1)", "Token ←", show=False),
        Binding("right", "move(1)", "Token →", show=False),
        Binding("up", "jump_iteration(-1)", "Previous iteration", show=False),
        Binding("down", "jump_iteration(1)", "Next iteration", show=False),
        Binding("home", "move_to(0)", "First token", show=False),
        Binding("end", "move_to(-1)", "Last token", show=False),
    ]

    class IterationChosen(Message):
        """The cursor moved onto a token of another iteration."""

        def __init__(self, stream: TokenStream, iteration: int) -> None:
            super().__init__()
            self.stream = stream
            self.iteration = iteration

        @property
        def control(self) -> TokenStream:
            return self.stream

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.texts: list[str] = []
        self.kinds: list[str] = []
        self.iteration_of: list[int] = []
        self.cursor: int | None = None  # None: follow the newest token
        self.marked_iteration: int | None = None
        self._lines: list[list[Piece]] = []
        self._line_of_token: list[int] = []
        self._layout_width = 0

    # -- content ---------------------------------------------------------------------------------
    def clear(self) -> None:
        self.texts, self.kinds, self.iteration_of = [], [], []
        self.cursor = None
        self.marked_iteration = None
        self._relayout()

    def show_tokens(self, tokens: list[tuple[str, str, int]]) -> None:
        """Replace the content with (real text, kind, iteration) triples."""
        self.texts = [t for t, _, _ in tokens]
        self.kinds = [k for _, k, _ in tokens]
        self.iteration_of = [i for _, _, i in tokens]
        self.cursor = None if not tokens else min(self.cursor or 0, len(tokens) - 1)
        self._relayout()

    def append_iterations(self, iterations: list[Iteration]) -> None:
        """Add the tokens of newly verified iterations and mark the newest one (live runs).

        Only the lines that changed are redrawn (the new tokens, and the previous iteration's
        lines that lose their mark): the screen's drawing competes with the running decode.
        """
        first_new = len(self.texts)
        laid_out = self._line_of_token  # none while the pane is hidden (laid out when it shows)
        dirty_from = laid_out[first_new - 1] if 0 < first_new <= len(laid_out) else 0
        if self.marked_iteration is not None and self.marked_iteration in self.iteration_of:
            marked = self.iteration_of.index(self.marked_iteration)
            dirty_from = min(dirty_from, laid_out[marked] if marked < len(laid_out) else 0)
        for it in iterations:
            for emitted in it.emit:
                self.texts.append(real_text(emitted.text))
                self.kinds.append(emitted.kind)
                self.iteration_of.append(it.k)
        if iterations:
            self.marked_iteration = iterations[-1].k
        self._relayout(dirty_from=dirty_from)
        if self.cursor is None:
            self.scroll_end(animate=False, immediate=True)

    @property
    def token_count(self) -> int:
        return len(self.texts)

    def mark_iteration(self, iteration: int | None) -> None:
        """Underline the tokens of ``iteration`` (chosen in the table), put the cursor on them and
        bring them into view; the stream stops following the newest token."""
        self.marked_iteration = iteration
        if iteration is not None and iteration in self.iteration_of:
            current = self.cursor
            if current is None or self.iteration_of[current] != iteration:
                self.cursor = current = self.iteration_of.index(iteration)
            self._scroll_to_token(current)
        self.refresh()

    # -- layout ----------------------------------------------------------------------------------
    def _relayout(self, dirty_from: int = 0) -> None:
        """Wrap the tokens into lines; redraw from line ``dirty_from`` on. Not before the pane has
        its size (its first resize lays it out): 131072 tokens laid out one to a line cost seconds."""
        if not self.scrollable_content_region.width:
            self._layout_width = 0
            self._lines, self._line_of_token = [], []  # nothing stale is drawn or scrolled to
            return
        width = self.scrollable_content_region.width
        self._layout_width = width
        lines: list[list[Piece]] = [[]]
        first_line: list[int] = []
        x = 0

        def place(index: int, text: str, w: int) -> None:
            nonlocal x
            if len(first_line) == index:
                first_line.append(len(lines) - 1)
            lines[-1].append(Piece(index, text, w, x))
            x += w

        def new_line() -> None:
            nonlocal x
            lines.append([])
            x = 0

        for index, text in enumerate(self.texts):
            for n, part in enumerate(shown_controls(text).split("\n")):  # a bidi control as ⟨U+202E⟩
                if n:  # the newline itself: one marker cell, so the token stays visible and selectable
                    place(index, " ", 1)
                    new_line()
                while part:
                    w = cell_len(part)
                    if x + w <= width:
                        place(index, part, w)
                        break
                    if x > 0 and w <= width:  # wrap before the token rather than split it
                        new_line()
                        continue
                    head = _fit(part, width - x)  # longer than a line: fold it
                    place(index, head, cell_len(head))
                    part = part[len(head):]
                    new_line()
            if len(first_line) == index:  # an empty token still has a place
                first_line.append(len(lines) - 1)
        self._lines = lines
        self._line_of_token = first_line
        self.virtual_size = Size(width, len(lines))
        if dirty_from:
            self.refresh_lines(dirty_from, len(lines) - dirty_from)
        else:
            self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        if self.scrollable_content_region.width != self._layout_width:
            self._relayout()
        self._fit_title()

    def show_title(self, label: str) -> None:
        """Title the pane with the run's ``label``: "Output · Speculative (greedy, γ=4)"; where that
        does not fit the pane's border, the label alone, so that it is not cut."""
        self._run_label = label
        self._fit_title()

    def _fit_title(self) -> None:
        label = self._run_label
        if label is None:  # titled by its owner (the compare screen's sides)
            return
        if not label:
            self.border_title = self.BORDER_TITLE
            return
        room = self.size.width - 4  # the corners and the space either side of the title
        full = f"{self.BORDER_TITLE} · {label}"
        # a title is markup: a saved run's label "[/x]" was a MarkupError that ended the app
        self.border_title = escape(shown_controls(full if len(full) <= room or room <= 0 else label))

    # -- drawing ---------------------------------------------------------------------------------
    def kind_styles(self) -> dict[str, Style]:
        """The style of each token kind, and of "space", "current" and "cursor" (the theme's now)."""
        names = (*EMIT_KINDS, "space", "current", "cursor")
        return {name: component_style(self, f"token-stream--{name}") for name in names}

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        line_no = scroll_y + y
        if line_no >= len(self._lines):
            return Strip.blank(width, base)
        styles = self.kind_styles()
        space, current, cursor = styles["space"], styles["current"], styles["cursor"]
        segments = []
        for piece in self._lines[line_no]:
            kind = self.kinds[piece.token]
            style = base + styles.get(kind, Style())
            if piece.text.isspace():
                style += space
            if self.marked_iteration is not None and self.iteration_of[piece.token] == self.marked_iteration:
                style += current
            if self.cursor == piece.token and self.has_focus:
                style += cursor
            segments.append(Segment(piece.text, style))
        strip = Strip(segments)
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_offsets(scroll_x, line_no)

    # -- cursor ----------------------------------------------------------------------------------
    def _set_cursor(self, index: int) -> None:
        if not self.texts:
            return
        index = min(max(index, 0), len(self.texts) - 1)
        self.cursor = index
        self._scroll_to_token(index)
        iteration = self.iteration_of[index]
        if iteration != self.marked_iteration:
            self.marked_iteration = iteration
            self.post_message(self.IterationChosen(self, iteration))
        self.refresh()

    def _scroll_to_token(self, index: int) -> None:
        if 0 <= index < len(self._line_of_token):
            line = self._line_of_token[index]
            top, height = self.scroll_y, self.scrollable_content_region.height
            if line < top or line >= top + height:
                self.scroll_to(y=max(line - height // 2, 0), animate=False, immediate=True)

    def action_move(self, delta: int) -> None:
        start = self.cursor if self.cursor is not None else len(self.texts) - 1 - (delta > 0)
        self._set_cursor(start + delta)

    def action_move_to(self, index: int) -> None:
        self._set_cursor(index if index >= 0 else len(self.texts) + index)

    def action_jump_iteration(self, delta: int) -> None:
        if not self.texts:
            return
        here = self.iteration_of[self.cursor if self.cursor is not None else len(self.texts) - 1]
        target = here + delta
        if target in self.iteration_of:
            self._set_cursor(self.iteration_of.index(target))
        else:
            self._set_cursor(0 if delta < 0 else len(self.texts) - 1)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        line_no = self.scroll_offset.y + offset.y
        if 0 <= line_no < len(self._lines):
            for piece in self._lines[line_no]:
                if piece.x <= offset.x < piece.x + piece.width:
                    self._set_cursor(piece.token)
                    break

    def on_focus(self) -> None:
        if self.cursor is None and self.texts:
            self.cursor = len(self.texts) - 1
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()


def _fit(text: str, width: int) -> str:
    """The longest prefix of ``text`` that fits in ``width`` cells (at least one character)."""
    out = ""
    for char in text:
        if cell_len(out + char) > width and out:
            break
        out += char
    return out
