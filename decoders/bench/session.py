"""``bench --workload session``: the prompts run as one session, in a fixed order, each row that
drafts from a memory of earlier responses (suffix decoding) with a memory of its own.

The session is the prompts in the order the report lists them (the file's order; with ``--limit``,
those taken round-robin, task groups in Spec-Bench's order, file order within each); a multi-turn
question (MT-bench's) runs every turn, each after the previous one's answer (the baseline's, as the
assistant's message of the chat template): its turns are positions of their own, one after the
other. Every row runs every position as in a run of separate prompts (each beside its own
baseline, warmed up first); what differs is the memory:

* each row that drafts from a memory (`drafts_from_memory`) has its own (`SessionMemories`),
  empty at the session's start (and at each repeat's: a repeat is the session again; with
  ``--suffix-memory PATH``, a copy of that file's memory, the file left as it is), made the
  model's memory while that row runs (`decoders.methods.shared.suffix_memory.memory_in_use`), so
  that the engine joins the row's answer to it after the run's and its baseline's clocks stopped,
  as in the app; a prompt's own baseline output never joins it, and suffix decoding forgets a
  prompt's own earlier responses before it drafts;
* the report then gives each of those rows' speedup by position (`SessionFigures`): the first
  third of the positions against the last third, each pooled as the overall table pools (speedup
  and spread), and the speedup at every position; and every row's figures per turn.

Rows that draft from no memory run the session too, but nothing they draft from changes between
positions: the position table leaves them out (it says so), the turn table has them.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, ContextManager, Sequence

from decoders.bench.aggregate import MethodStats
from decoders.bench.common import mean, rounded
from decoders.bench.entries import Sample
from decoders.methods.shared.suffix_memory import SuffixMemory, drafts_from_memory, memory_in_use
from decoders.records.codec import Record

if TYPE_CHECKING:
    from decoders.bench.drafts import Row
    from decoders.models.family import Family

#: ``bench --workload``'s values: separate prompts (the default), or one session.
WORKLOADS = ("prompts", "session")


def remembers(row: Row) -> bool:
    """Whether ``row`` drafts from a memory of earlier responses (its speedup can move by position)."""
    return drafts_from_memory(row.method, str(row.params.suffix_source))


class SessionMemories:
    """Each memory row's own memory over one session of one backend, by row label: empty, or a
    copy of ``seed`` (``bench --suffix-memory``: the file's memory, never written)."""

    def __init__(self, family: Family, seed: SuffixMemory | None = None):
        self.family, self.seed = family, seed
        self.held: dict[str, SuffixMemory] = {}

    def sizes(self, rows: Sequence[Row]) -> dict[str, int]:
        """Responses in each memory row's memory now (before it runs the next position)."""
        start = len(self.seed) if self.seed is not None else 0
        return {row.label: len(self.held[row.label]) if row.label in self.held else start
                for row in rows if remembers(row)}

    def of(self, row: Row) -> ContextManager[Any]:
        """While inside, ``row``'s runs draft from and join its own memory (nothing for a row
        that drafts from none)."""
        if not remembers(row):
            return nullcontext()
        memory = self.held.get(row.label)
        if memory is None:
            memory = self.seed.copy() if self.seed is not None else SuffixMemory(row.params.suffix_depth)
            self.held[row.label] = memory
        return memory_in_use(self.family, memory)


class RowPositions(Record, kw_only=True):
    """One memory row's speedup by its place in the session."""

    first: MethodStats  # the first third of the positions, pooled
    last: MethodStats  # the last third
    speedups: list[float | None]  # at each position (the mean over repeats)
    memory: list[int]  # responses in its memory when it ran each position (the first repeat's)


class SessionFigures(Record, kw_only=True):
    """What a session (``bench --workload session``) adds to the report."""

    order: list[str]  # the positions in the order run: "q81", "q81 turn 2", "q161", ...
    third: int  # positions in each of the first and the last third
    rows: dict[str, RowPositions]  # the rows that draft from a memory, by label
    turns: dict[str, dict[str, MethodStats]]  # "1", "2" -> every row's figures over that turn's positions


def session_figures(samples: Sequence[Sample], labels: Sequence[str], memory_rows: Sequence[str]) -> SessionFigures:
    """The session's figures from its samples (each with its ``position`` and ``turn``): every
    row in ``labels`` per turn, the rows in ``memory_rows`` by position."""
    positions = sorted({s.position for s in samples if isinstance(s.position, int)})
    by_position = {p: [s for s in samples if s.position == p] for p in positions}
    order = [_name(by_position[p][0]) for p in positions]
    third = max(1, len(positions) // 3)
    first = [s for p in positions[:third] for s in by_position[p]]
    last = [s for p in positions[-third:] for s in by_position[p]]
    rows = {}
    for label in memory_rows:
        speedups = [rounded(mean(s.ours[label].speedup for s in by_position[p] if label in s.ours), 4)
                    for p in positions]
        sizes = [next((s.memory.get(label, 0) for s in by_position[p] if isinstance(s.memory, dict)), 0)
                 for p in positions]
        rows[label] = RowPositions(first=MethodStats.of(first, label), last=MethodStats.of(last, label),
                                   speedups=speedups, memory=sizes)
    turns = sorted({s.turn for s in samples if isinstance(s.turn, int)})
    per_turn = {str(t): {label: MethodStats.of([s for s in samples if s.turn == t], label) for label in labels}
                for t in turns}
    return SessionFigures(order=order, third=third, rows=rows, turns=per_turn)


def _name(sample: Sample) -> str:
    turn = sample.turn if isinstance(sample.turn, int) else 1
    return f"q{sample.question_id}" + (f" turn {turn}" if turn > 1 else "")
