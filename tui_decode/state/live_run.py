"""One run while it streams: its phase, the iterations and tokens so far, the progress the status
line shows and the figures that can already be known. No Textual here: the main screen draws what
this holds, and the tests drive it without a terminal."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from decoders.analysis.stats import DecodeStats
from decoders.core.events import PhaseStarted, Progress
from decoders.core.params import METHOD_NAMES, DecodeParams
from decoders.records.run import Iteration

#: While a run streams, the token stream and the status line take every batch; the table and the
#: live figures catch up at most this often (seconds), and at the end of the run. Their redraws
#: cost tens of milliseconds on a small CPU: time the decode worker (measured against a baseline
#: decoded while the screen was quiet) would otherwise lose, making the method look slower.
SLOW_PANE_INTERVAL = 0.5


def emitted_drafts(it: Iteration) -> int:
    """Drafts of ``it`` that reached the output. `DecodeStats.accepted` also counts drafts the
    target accepted after a stop token or the token limit ended the run, which saved runs do not."""
    return sum(1 for e in it.emit if e.kind == "acc")


def figures_of(stats: DecodeStats, accepted: int) -> dict[str, Any]:
    """What can be said about a run while it is still going: tokens, iterations, acceptance
    (named as in the run's `Summary`); ``accepted`` counts the drafts that were emitted."""
    return {
        "tokens": stats.tokens,
        "iterations": stats.iterations,
        "tau": stats.tau,
        "drafted": stats.draft_tokens,
        "accepted": accepted,
        "judged": stats.judged,
        "accept_rate": round(accepted / stats.judged, 3) if stats.judged else None,
    }


def live_figures(iterations: Iterable[Iteration]) -> dict[str, Any]:
    """`figures_of` the statistics of ``iterations``."""
    iterations = list(iterations)
    return figures_of(DecodeStats.of(iterations), sum(emitted_drafts(it) for it in iterations))


class LiveRun:
    """The state of one run from ctrl+r to its result.

    ``phase`` is "starting", then "baseline" (the autoregressive reference, measured or reused),
    then "method"; or "method" alone when the baseline steps in alternation with it (``paired``).
    Iterations arrive in the method phase only; a baseline phase reports progress.
    Each measured phase begins with the prompt's prefill, which reports nothing until its first
    token: `prefilling` says so, and the status line shows the prefill as its own step.
    After the method's last token, a "curve" phase (`measuring`) when the engine measures T(k):
    the run's tokens and iterations are all in, its time stops (`elapsed`), and the progress
    counts the curve's forwards.
    """

    def __init__(self, params: DecodeParams, prompt: str, clock: Callable[[], float] = time.monotonic,
                 slow_pane_interval: float = SLOW_PANE_INTERVAL) -> None:
        self.params = params
        self.prompt = prompt
        self.clock = clock
        self.slow_pane_interval = slow_pane_interval
        self.started = clock()
        self.phase = "starting"
        self.baseline_cached = False
        self.paired = False  # the baseline steps in alternation with the method (one phase for both)
        self.iterations: list[Iteration] = []
        self.stats = DecodeStats()  # observed iteration by iteration
        self.accepted = 0  # drafts emitted (see `emitted_drafts`)
        self.output_tokens: list[str] = []  # display text of each emitted token
        self.progress_tokens = 0  # of the current phase
        self.progress_total = params.max_new_tokens
        self.views_cleared = False  # the method phase has replaced the run shown before
        self.prompt_tokens = 0
        self.prefilling = False
        self.prefill_started = self.started
        self.prefill_s: float | None = None  # the current phase's prefill (with its first token)
        self.measuring = False  # the "curve" phase: every token is in, T(k) is measured
        self.curve_forwards = (0, 0)  # of the curve: done, total
        self.finished_at: float | None = None  # when the last token came (the curve phase began)
        self._pending_rows: list[Iteration] = []
        self._slow_panes_at = float("-inf")

    # -- events ----------------------------------------------------------------------------------
    def enter(self, phase: PhaseStarted) -> None:
        """The engine moved to its baseline, its method or its curve phase."""
        if phase.phase == "curve":
            self.measuring = True
            self.finished_at = self.clock()
            self.curve_forwards = (0, phase.max_new_tokens)
            return
        self.phase = phase.phase
        self.progress_tokens = 0
        self.progress_total = phase.max_new_tokens
        self.prompt_tokens = phase.prompt_tokens
        self.prefilling = phase.prompt_tokens > 0 and not (phase.phase == "baseline" and phase.cached)
        self.prefill_started = self.clock()
        self.prefill_s = None
        if phase.phase == "baseline":
            self.baseline_cached = phase.cached
        else:
            self.views_cleared = True
            self.paired = phase.paired

    def _prefilled(self, seconds: float | None = None) -> None:
        if self.prefilling:
            self.prefilling = False
            self.prefill_s = seconds if seconds is not None else self.clock() - self.prefill_started

    def add(self, events: Iterable[Iteration | Progress]) -> list[Iteration]:
        """Take one batch of the worker's events; returns its iterations, in order."""
        new: list[Iteration] = []
        for event in events:
            if isinstance(event, Progress) and event.phase == "curve":
                self.curve_forwards = (event.tokens, event.total)
            elif isinstance(event, Progress):
                self._prefilled()
                self.progress_tokens, self.progress_total = event.tokens, event.total
            elif isinstance(event, Iteration):
                first = not self.iterations and not new and event.t_end_ms is not None
                self._prefilled(event.t_end_ms / 1000 if first and event.t_end_ms is not None else None)
                new.append(event)
                self.stats.observe(event)
                self.accepted += emitted_drafts(event)
                self.output_tokens.extend(e.text for e in event.emit)
        if new:
            self.iterations.extend(new)
            self._pending_rows.extend(new)
            self.progress_tokens = len(self.output_tokens)
            self.progress_total = self.params.max_new_tokens
        return new

    # -- what the screen shows -------------------------------------------------------------------
    @property
    def method_label(self) -> str:
        return METHOD_NAMES.get(self.params.method, self.params.method)

    @property
    def tokens(self) -> int:
        """Tokens the method has emitted so far."""
        return len(self.output_tokens)

    @property
    def fraction(self) -> float | None:
        """Of the current phase's tokens; None while it prefills (no token to count yet)."""
        if self.measuring:
            done, total = self.curve_forwards
            return done / max(total, 1)
        if self.prefilling:
            return None
        return self.progress_tokens / max(self.progress_total, 1)

    @property
    def status(self) -> str:
        """The status line's words for where the run is."""
        if self.phase == "starting":
            return "starting …"
        if self.measuring:
            done, total = self.curve_forwards
            return (f"{self.method_label}: done, {self.tokens} tokens in {self.elapsed():.1f} s · measuring T(k), "
                    f"the verify cost by width ({done}/{total} forwards) …")
        name = "baseline" if self.phase == "baseline" else self.method_label
        if self.prefilling:
            waited = self.clock() - self.prefill_started
            return f"{name}: prefill {self.prompt_tokens} prompt tokens … {waited:.1f} s"
        prefill = f" · prefill {self.prefill_s:.1f} s" if self.prefill_s is not None else ""
        if self.phase == "baseline":
            if self.baseline_cached:
                return "baseline: reusing the autoregressive run measured for this prompt"
            return f"baseline: autoregressive reference, {self.progress_tokens}/{self.progress_total} tokens{prefill}"
        beside = " · baseline alongside" if self.paired else ""
        return f"{self.method_label}: {self.tokens}/{self.params.max_new_tokens} tokens{beside}{prefill}"

    def figures(self) -> dict[str, Any]:
        """The figures known mid-run (`figures_of` its statistics)."""
        return figures_of(self.stats, self.accepted)

    def elapsed(self) -> float:
        """Seconds from ctrl+r to the last token (to now while tokens still come)."""
        return (self.finished_at if self.finished_at is not None else self.clock()) - self.started

    # -- the panes drawn less often --------------------------------------------------------------
    def slow_panes_due(self) -> bool:
        """Whether the table and the figures are due a redraw (see `SLOW_PANE_INTERVAL`)."""
        return self.clock() - self._slow_panes_at >= self.slow_pane_interval

    def take_rows(self) -> list[Iteration]:
        """The iterations not yet in the table; the slow panes count as drawn from now."""
        rows, self._pending_rows = self._pending_rows, []
        self._slow_panes_at = self.clock()
        return rows
