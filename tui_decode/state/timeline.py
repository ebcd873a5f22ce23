"""Where each run's time went, on one wall-clock axis: its prefill, then iteration by iteration
the draft (helper forwards, n-gram lookup) and the verify forward, and what is neither (sampling,
bookkeeping, host transfers). Two runs share the axis (a method against its baseline), so the
longer bar is the slower run, and its shape shows why. No Textual here: `TimelineStrip` colours
the phases from the theme."""

from __future__ import annotations

from dataclasses import dataclass

from decoders.records.run import Run

PREFILL, DRAFT, VERIFY, OTHER, IDLE = "prefill", "draft", "verify", "other", "idle"
PHASES = (PREFILL, DRAFT, VERIFY, OTHER)
GLYPH = {PREFILL: "▓", DRAFT: "░", VERIFY: "█", OTHER: "▁", IDLE: " "}


@dataclass(frozen=True)
class Span:
    phase: str
    start_ms: float
    end_ms: float


def spans(run: Run) -> list[Span]:
    """The run's time as consecutive spans from its start (consumer time already left out)."""
    out: list[Span] = []
    t = 0.0
    for k, it in enumerate(run.iters):
        end = it.t_end_ms if it.t_end_ms is not None else t + it.t_draft_ms + it.t_verify_ms
        draft, verify = it.t_draft_ms, it.t_verify_ms
        if k == 0:  # the first iteration holds the prefill: its verify forward ran over the prompt
            parts = [(DRAFT, draft), (PREFILL, verify)]
        else:
            parts = [(DRAFT, draft), (VERIFY, verify)]
        for phase, ms in parts:
            if ms > 0:
                out.append(Span(phase, t, min(t + ms, end)))
                t = min(t + ms, end)
        if end > t:
            out.append(Span(OTHER, t, end))
        t = max(t, end)
    return out


def _timed(run: Run | list[Span]) -> list[Span]:
    """The run's spans (given already worked out: a run of 131072 iterations takes a while)."""
    return run if isinstance(run, list) else spans(run)


def columns(run: Run | list[Span], width: int, total_ms: float) -> list[str]:
    """The phase that fills most of each of ``width`` columns of ``total_ms`` (idle past the run's end)."""
    if total_ms <= 0 or width <= 0:
        return [IDLE] * max(width, 0)
    per = total_ms / width
    filled = [dict.fromkeys(PHASES, 0.0) for _ in range(width)]
    for span in _timed(run):
        a, b = span.start_ms, span.end_ms
        first, last = min(int(a // per), width - 1), min(int(b // per), width - 1)
        if first == last:  # most spans, in a long run: inside one column
            filled[first][span.phase] += b - a
            continue
        for col in range(first, last + 1):
            lo, hi = max(a, col * per), min(b, (col + 1) * per)
            if hi > lo:
                filled[col][span.phase] += hi - lo
    return [max(f, key=f.__getitem__) if any(f.values()) else IDLE for f in filled]


def shares(run: Run | list[Span]) -> dict[str, float]:
    """Milliseconds in each phase."""
    out = dict.fromkeys(PHASES, 0.0)
    for span in _timed(run):
        out[span.phase] += span.end_ms - span.start_ms
    return out


def total_ms(run: Run | list[Span]) -> float:
    """Where the run's last span ends (a saved run without iteration end times: the sum of its parts)."""
    timed = _timed(run)
    return timed[-1].end_ms if timed else 0.0
