"""The session's runs: every run finished, opened or saved, with the figures the history lists,
and the token streams two of them are compared by. No Textual here: the history screen draws it.

Each run brings two streams: the method's output and the autoregressive baseline it was measured
against (the engine decodes the baseline once per prompt and settings and keeps it in the
result, tokens included), so a run can be compared with another run or with its own baseline.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from decoders.analysis.spread_text import value_with_spread
from decoders.analysis.summary import Summary, first_divergence
from decoders.analysis.verdict import headline
from decoders.core.declarations import get_method
from decoders.core.errors import DecodeError
from decoders.records.files import token_texts_from_ids
from decoders.records.run import Run, RunResult
from tui_decode.state.run_summary import acceptance_text, judged_drafts
from tui_decode.state.runs_folder import saved_runs
from tui_decode.state.token_text import real_text, run_tokens, shown_controls

#: Saved runs of the runs folder the history lists besides the session's: the newest ones, as
#: many as these bytes hold (a 500-token speculative run is about 2 MB, a quarter second to read),
#: so that h answers at once; ctrl+o opens any of them.
SAVED_LISTED = 20
SAVED_BYTES = 4 << 20

SOURCES = {"run": "session", "opened": "opened", "saved": "saved"}
SOURCE_WIDTH = 12
LABEL_WIDTH = 32


@dataclass
class HistoryEntry:
    """One run: a result and where it came from (run now, opened with ctrl+o, or a saved file)."""

    number: int  # 1, 2, ... in the order the session met the runs
    result: RunResult
    source: str  # run | opened | saved
    path: Path | None = None  # the file it was saved to or opened from
    saved_to: Path | None = None  # the JSON ctrl+s wrote it to (a second ctrl+s writes no second one)


@dataclass(frozen=True)
class Stream:
    """One token stream a comparison can show: a run's method output, or its baseline."""

    entry: HistoryEntry
    role: str  # method | baseline

    @property
    def run(self) -> Run:
        return self.entry.result.method if self.role == "method" else self.entry.result.baseline

    @property
    def label(self) -> str:
        if self.role == "baseline":
            return f"#{self.entry.number} baseline · {self.run.label}"
        return f"#{self.entry.number} {self.run.label}"

    @property
    def key(self) -> tuple[int, str]:
        return self.entry.number, self.role


def stream_tokens(run: Run) -> list[tuple[str, str, int]]:
    """(real text, kind, iteration) of each token of ``run``: from its token list when it kept
    one (baselines always do), else rebuilt from its iterations."""
    if run.tokens and len(run.tokens) == len(run.kinds) == len(run.tok_iter):
        return [(real_text(t), k, i) for t, k, i in zip(run.tokens, run.kinds, run.tok_iter, strict=False)]
    return run_tokens(run)


def key_params(result: RunResult, full: bool = False) -> str:
    """The parameters the run's label does not give (the label names the mode and the draft
    length): the token budget, and a sampled run's temperature and seed; ``full`` adds the mode
    and the draft length."""
    params = result.params or {}
    parts = []
    if full:
        parts.append(str(params.get("mode", "?")))
        try:
            method = get_method(result.method.method)
        except DecodeError:
            method = None
        draft = next((s for s in method.params if s.name == method.draft_length), None) if method else None
        if draft is not None and draft.name in params:  # its declared symbol: "γ=4"
            parts.append(f"{draft.symbol or draft.name}={params[draft.name]}")
    if "max_new_tokens" in params:
        parts.append(f"max {params['max_new_tokens']}")
    if params.get("mode") == "sampling":
        parts.append(f"T={params.get('temperature')} s{params.get('seed')}")
    return " · ".join(parts)


def clip(text: str, width: int) -> str:
    text = shown_controls(text)  # a saved file's name may hold an ESC sequence
    return text if len(text) <= width else text[:width - 1] + "…"


def headline_speed(s: Summary) -> float | None:
    """The speedup a run is judged by: decode (the prefill apart) when measured, else end to end
    (`decoders.analysis.verdict.headline`). The status line, the explanation and the history all
    show this one."""
    return headline(s).speedup


def speedup_text(result: RunResult) -> str:
    """The history's speedup cell: the decode speedup with its spread, the figure the status line
    gives; a run without a decode rate (too few tokens) shows its end-to-end one, marked "e2e"."""
    h = headline(result.summary)
    if h.speedup is None:
        return "–"
    figure = value_with_spread(h.speedup, h.spread).replace(" +/- ", " ±")  # compact: a table cell
    return figure + ("" if h.decode else " e2e")


def identical_text(result: RunResult) -> str:
    s = result.summary
    if s.identical is None:
        return "sampled"
    return "yes" if s.identical else f"no @{s.first_divergence}"


def baseline_tau(run: Run) -> str:
    forwards = run.n_forward.get("main", 0)
    return f"{len(run.ids) / forwards:.2f}" if forwards else "1.00"


#: The history's columns, in the order `row_cells` gives them: the figures a run is judged by
#: first, so that at 80 columns they stay in view before the long label.
HISTORY_COLUMNS = ("#", "from", "decode speedup ±", "tau", "accept", "tokens", "same?", "method", "budget")
#: A saved run's file name starts with when it was saved (`runs_folder.run_file_stem`).
STAMPED = re.compile(r"(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})")


def saved_at(path: Path, today: datetime.date | None = None) -> str | None:
    """When a run file was saved, from its name: "19:35" today, "12-01 19:35" another day; None
    for a name without the stamp."""
    match = STAMPED.match(path.name)
    if match is None:
        return None
    year, month, day, hour, minute, _ = (int(g) for g in match.groups())
    try:
        when = datetime.datetime(year, month, day, hour, minute)
    except ValueError:
        return None
    if when.date() == (today or datetime.date.today()):
        return when.strftime("%H:%M")
    return when.strftime("%m-%d %H:%M")


def row_cells(stream: Stream, today: datetime.date | None = None) -> list[str]:
    """The history's cells for ``stream``, in `HISTORY_COLUMNS` order: #, from (the session, or
    when the file was saved), speedup (± its spread), tau, acceptance, tokens, identical to the
    baseline, method (its label), budget."""
    entry, result = stream.entry, stream.entry.result
    source = SOURCES.get(entry.source, entry.source)
    if entry.path is not None and entry.source != "run":
        source = saved_at(entry.path, today) or clip(entry.path.name, SOURCE_WIDTH)
    if stream.role == "baseline":
        run = result.baseline
        return [f"{entry.number}b", source, "1.00x ref", baseline_tau(run), "–", str(len(run.ids)), "–",
                clip(f"↳ baseline {run.label}", LABEL_WIDTH), key_params(result)]
    s = result.summary
    return [str(entry.number), source, speedup_text(result), "–" if s.tau is None else f"{s.tau:.2f}",
            acceptance_text(s, judged_drafts(result.method), named=False), str(s.tokens), identical_text(result),
            clip(result.method.label, LABEL_WIDTH), key_params(result)]


def same_baseline(a: RunResult, b: RunResult) -> bool:
    return a.baseline is b.baseline or (a.prompt_ids == b.prompt_ids and a.baseline.ids == b.baseline.ids
                                        and a.baseline.label == b.baseline.label)


@dataclass
class RunHistory:
    """Every run the session has met, oldest first; saved files are listed beside them."""

    entries: list[HistoryEntry] = field(default_factory=list)
    _saved_cache: dict[tuple[str, float], RunResult | None] = field(default_factory=dict)
    #: What the last `load_saved` changed in the files it read: one line each ("NAME: ...").
    text_notes: list[str] = field(default_factory=list)

    def record(self, result: RunResult, source: str = "run", path: Path | None = None) -> HistoryEntry:
        """Add a run (the same result twice is one entry)."""
        where = path.resolve() if path is not None else None
        for entry in self.entries:
            if entry.result is result or (where is not None and entry.path is not None
                                          and entry.path.resolve() == where):
                if path is not None and entry.path is None:
                    entry.path = path
                return entry
        entry = HistoryEntry(len(self.entries) + 1, result, source, path)
        self.entries.append(entry)
        return entry

    def mark_saved(self, result: RunResult, path: Path) -> None:
        """``result`` was saved to ``path`` (so the folder's listing does not show it twice)."""
        self.record(result, "run", path).saved_to = path

    def saved_file(self, result: RunResult) -> Path | None:
        """The JSON ctrl+s saved ``result`` to this session, while it is still there (else None)."""
        for entry in self.entries:
            if entry.result is result and entry.saved_to is not None:
                return entry.saved_to if entry.saved_to.is_file() else None
        return None

    def load_saved(self, folder: Path, limit: int = SAVED_LISTED, budget: int = SAVED_BYTES,
                   check_texts: Callable[[RunResult], str | None] = token_texts_from_ids) -> list[str]:
        """Add the newest saved runs of ``folder`` not yet in the history (``limit`` files, and
        no more new files than ``budget`` bytes); returns one line per file that could not be read
        (the history lists the others). A file listed before and deleted since is listed no more.
        Each file read has its token texts made its ids' by ``check_texts`` (see
        `decoders.records.files.token_texts_from_ids`); what that changed is in `text_notes`."""
        self.text_notes = []
        self.entries = [e for e in self.entries if e.source != "saved" or e.path is None or e.path.is_file()]
        known = {entry.path.resolve() for entry in self.entries if entry.path is not None}
        problems = []
        chosen: list[tuple[Path, tuple[str, float]]] = []
        for path in saved_runs(folder)[:limit]:
            if path.resolve() in known:
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            key = (str(path), stat.st_mtime)
            if key not in self._saved_cache:
                if stat.st_size > budget:
                    break
                budget -= stat.st_size
            chosen.append((path, key))
        for path, key in reversed(chosen):  # oldest first, like the session's runs
            if key not in self._saved_cache:
                try:
                    self._saved_cache[key] = loaded = RunResult.load(path)
                    note = check_texts(loaded)
                    if note:
                        self.text_notes.append(f"{path.name}: {note}")
                except DecodeError as error:
                    self._saved_cache[key] = None
                    problems.append(str(error))
            result = self._saved_cache[key]
            if result is not None:
                self.record(result, "saved", path)
        return problems

    def streams(self) -> list[Stream]:
        """The session's runs newest first, then the saved files' newest first: each run, then its
        baseline where no run listed before it shares that baseline."""
        out: list[Stream] = []
        shown: list[RunResult] = []
        for entry in [*reversed(self.session()), *reversed([e for e in self.entries if e.source == "saved"])]:
            out.append(Stream(entry, "method"))
            if not any(same_baseline(entry.result, other) for other in shown):
                out.append(Stream(entry, "baseline"))
                shown.append(entry.result)
        return out

    def preselected(self) -> list[Stream]:
        """What the history marks when it opens, left side first: the last two runs, or the last
        run's baseline and the run when there is only one."""
        entries = self.session() or self.entries
        if not entries:
            return []
        last = entries[-1]
        if len(entries) == 1:
            return [Stream(last, "baseline"), Stream(last, "method")]
        return [Stream(entries[-2], "method"), Stream(last, "method")]

    def session(self) -> list[HistoryEntry]:
        """The runs of this session: run or opened (not merely listed from the runs folder)."""
        return [e for e in self.entries if e.source != "saved"]


#: The leading columns of the history's export (`export_rows`); `tui_decode.state.exports` adds the figures.
EXPORT_KEY = ("run", "from", "method", "params", "prompt")
EXPORT_PROMPT = 100  # characters of the prompt a row keeps


def export_rows(history: RunHistory) -> list[tuple[tuple[str, ...], Summary]]:
    """The history as a table to take elsewhere: one row a run, in the history's order (the
    session's newest first, then the saved files'), each run's figures against its own baseline
    (the baselines' rows would read 1.00x by definition). Nothing is clipped but the prompt."""
    rows: list[tuple[tuple[str, ...], Summary]] = []
    for stream in history.streams():
        if stream.role != "method":
            continue
        entry, result = stream.entry, stream.entry.result
        source = SOURCES.get(entry.source, entry.source)
        if entry.path is not None:
            source += f" {entry.path.name}"
        prompt = " ".join(result.prompt.split())
        prompt = prompt if len(prompt) <= EXPORT_PROMPT else prompt[:EXPORT_PROMPT - 1] + "…"
        rows.append(((str(entry.number), source, result.method.label, key_params(result, full=True), prompt),
                     result.summary))
    return rows


@dataclass(frozen=True)
class Comparison:
    """Two streams, token by token: where they first part (None: identical). Streams of two
    different prompts (or one prompt with and without the chat template) are not compared: their
    tokens continue different texts."""

    left: Stream
    right: Stream

    @property
    def same_prompt(self) -> bool:
        return self.left.entry.result.prompt_ids == self.right.entry.result.prompt_ids

    @property
    def divergence(self) -> int | None:
        return first_divergence(self.left.run.ids, self.right.run.ids)

    def summary(self) -> str:
        at = self.divergence
        n_left, n_right = len(self.left.run.ids), len(self.right.run.ids)
        if not self.same_prompt:
            a, b = len(self.left.entry.result.prompt_ids), len(self.right.entry.result.prompt_ids)
            return (f"different prompts ({a} and {b} tokens): side by side, not compared token by token "
                    f"({n_left} against {n_right} tokens)")
        if at is None:
            return f"identical: the same {n_left} tokens"
        if at >= min(n_left, n_right):
            return f"the same first {at} tokens; then one stops ({n_left} against {n_right} tokens)"
        if at == 0:
            return f"they part at the first token ({n_left} against {n_right} tokens)"
        return f"the same first {at} tokens, then they part at token {at} ({n_left} against {n_right} tokens)"
