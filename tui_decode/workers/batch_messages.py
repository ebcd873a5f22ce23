"""What the batch screen's worker (`tui_decode.screens.batch_screen`, issue 39) tells the screen:
progress lines, every sequence's tokens between two timed forwards, each row (or synthetic cell)
once measured, and the end of the run. Their handler names are the screen's, as when they were
declared inside it (``on_batch_screen_progress`` ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from decoders.bench.batch import BatchReport, BatchRow
    from decoders.bench.batch_synthetic import SyntheticBatchRow


class Progress(Message, namespace="batch_screen"):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class Stepped(Message, namespace="batch_screen"):
    """Every sequence's tokens so far in the run that goes (a copy, taken off the clock)."""

    def __init__(self, method: str, batch: int, round_: int, outs: list[list[int]],
                 done: list[str | None]) -> None:
        super().__init__()
        self.method, self.batch, self.round, self.outs, self.done = method, batch, round_, outs, done


class RowMeasured(Message, namespace="batch_screen"):
    def __init__(self, row: BatchRow | SyntheticBatchRow) -> None:
        super().__init__()
        self.row = row


class Ended(Message, namespace="batch_screen"):
    def __init__(self, error: str | None = None, report: BatchReport | None = None) -> None:
        super().__init__()
        self.error, self.report = error, report
