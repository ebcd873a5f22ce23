"""One side of a comparison: a token stream laid out line by line at the same token positions as
the stream beside it, so that the two read across; the first token where they part is marked.

A `TokenStream` (same colours by kind, same cursor and scrolling), whose lines are cut where both
streams fit instead of where this one alone would wrap. A gutter gives each line's first token
position; "≠" marks the line where the streams part. Newlines show as "↵" so lines stay aligned.
"""

from __future__ import annotations

import bisect

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip

from tui_decode.state.token_text import shown_controls
from tui_decode.widgets.styles import component_style
from tui_decode.widgets.token_stream import Piece, TokenStream

GUTTER = 6  # "  123≠ "


def aligned_lines(left: list[str], right: list[str], width: int, split_at: int | None = None) -> list[tuple[int, int]]:
    """[(first, end), ...] token positions of each line, so that the tokens of both streams at
    those positions fit in ``width`` cells; a line also starts at ``split_at`` (the divergence)."""
    return aligned_widths([cell_len(t) for t in left], [cell_len(t) for t in right], width, split_at)


def aligned_widths(left: list[int], right: list[int], width: int, split_at: int | None = None) -> list[tuple[int, int]]:
    """`aligned_lines` from the tokens' widths in cells (measured once per stream, not per layout)."""
    n = max(len(left), len(right))
    left = left + [0] * (n - len(left))
    right = right + [0] * (n - len(right))
    width = max(width, 1)
    lines = []
    start = 0
    while start < n:
        x_left = x_right = 0
        end = start
        while end < n:
            if end != start and end == split_at:
                break
            w_left, w_right = left[end], right[end]
            if end > start and (x_left + w_left > width or x_right + w_right > width):
                break
            x_left, x_right, end = x_left + w_left, x_right + w_right, end + 1
        lines.append((start, end))
        start = end
    return lines


def shown_text(text: str) -> str:
    """A token's real text on one line: a newline shows as "↵", a bidi control as "⟨U+202E⟩"."""
    return shown_controls(text.replace("\n", "↵"))


class AlignedStream(TokenStream):
    """Tokens coloured by kind, cut into lines at positions shared with ``partner``."""

    COMPONENT_CLASSES = TokenStream.COMPONENT_CLASSES | {"aligned-stream--gutter", "aligned-stream--diverge"}
    BORDER_SUBTITLE = ""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.partner: AlignedStream | None = None
        self.divergence: int | None = None
        self._spans: list[tuple[int, int]] = []
        self._spans_key: tuple = ()
        self.widths: list[int] = []  # each token's width in cells

    def show_aligned(self, tokens: list[tuple[str, str, int]], divergence: int | None) -> None:
        """(real text, kind, iteration) triples; ``divergence``: the first position where this
        stream and its partner differ."""
        self.divergence = divergence
        self.widths = [cell_len(shown_text(t)) for t, _, _ in tokens]
        self.show_tokens([(shown_text(t), k, i) for t, k, i in tokens])

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def line_of(self, position: int) -> int | None:
        n = bisect.bisect_right(self._spans, (position, float("inf"))) - 1
        if 0 <= n < len(self._spans) and self._spans[n][0] <= position < self._spans[n][1]:
            return n
        return None

    def line_text(self, line: int) -> str:
        """The tokens of one line, as plain text (tests, screen readers)."""
        return "".join(piece.text for piece in self._lines[line]) if 0 <= line < len(self._lines) else ""

    # -- layout ----------------------------------------------------------------------------------
    def _text_width(self) -> int:
        width = self.scrollable_content_region.width
        if self.partner is not None and self.partner.is_mounted and self.partner.scrollable_content_region.width:
            width = min(width, self.partner.scrollable_content_region.width)
        return max(width - GUTTER, 1)

    def _relayout(self, dirty_from: int = 0) -> None:
        """Lines at the positions both streams share: worked out once for the pair (the partner
        takes them when the width and the streams are the same), and not before the pane has its
        size (the first resize lays it out: 131072 tokens a side took seconds per layout)."""
        if not self.scrollable_content_region.width:
            self._layout_width = 0
            self._lines, self._line_of_token, self._spans, self._spans_key = [], [], [], ()
            return
        width = self._text_width()
        self._layout_width = self.scrollable_content_region.width
        partner = self.partner
        other = partner.widths if partner is not None else []
        key = (width, self.divergence, *sorted((id(self.widths), id(other))))  # the same two streams
        if partner is not None and partner._spans_key == key:
            self._spans = partner._spans
        else:
            self._spans = aligned_widths(self.widths, other, width, self.divergence)
        self._spans_key = key
        lines: list[list[Piece]] = []
        first_line: list[int] = []
        texts, widths = self.texts, self.widths
        for n, (start, end) in enumerate(self._spans):
            x = GUTTER
            line = []
            for index in range(start, min(end, len(texts))):
                line.append(Piece(index, texts[index], widths[index], x))
                first_line.append(n)
                x += widths[index]
            lines.append(line)
        self._lines = lines
        self._line_of_token = first_line
        self.virtual_size = Size(self.scrollable_content_region.width, len(lines))
        self.refresh()

    def relayout_with_partner(self) -> None:
        """Both sides again (one side's tokens or width changed)."""
        self._relayout()
        if self.partner is not None:
            self.partner._relayout()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """The partner scrolls along, so the two sides stay line for line."""
        super().watch_scroll_y(old_value, new_value)
        partner = self.partner
        if partner is not None and round(partner.scroll_y) != round(new_value):
            partner.scroll_to(y=new_value, animate=False, immediate=True)

    # -- drawing ---------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self.rich_style
        line_no = scroll_y + y
        if line_no >= len(self._lines):
            return Strip.blank(width, base)
        styles = self.kind_styles()
        space, cursor = styles["space"], styles["cursor"]
        diverge = component_style(self, "aligned-stream--diverge")
        gutter = component_style(self, "aligned-stream--gutter")
        start, _ = self._spans[line_no]
        parted = start == self.divergence
        mark = "≠" if parted else " "
        label = f"{start:>{GUTTER - 2}}{mark} " if start < len(self.texts) or parted else " " * GUTTER
        segments = [Segment(label, base + (diverge if parted else gutter))]
        for piece in self._lines[line_no]:
            style = base + styles.get(self.kinds[piece.token], Style())
            if piece.text.isspace():
                style += space
            if piece.token == self.divergence:
                style += diverge
            if self.cursor == piece.token and self.has_focus:
                style += cursor
            segments.append(Segment(piece.text, style))
        strip = Strip(segments)
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_offsets(scroll_x, line_no)
