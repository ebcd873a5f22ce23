"""`LiveRun`, one run's state while it streams, driven without a terminal: phases and the status
line's words, progress, tokens and figures as batches arrive, and when the slow panes are due."""

from __future__ import annotations

from pathlib import Path

import pytest

from decoders.core.events import PhaseStarted, Progress
from decoders.core.params import DecodeParams
from decoders.records.run import RunResult
from tui_decode.state.live_run import LiveRun

DATA = Path(__file__).parents[1] / "data"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def recorded(method: str) -> RunResult:
    return RunResult.load(DATA / f"run_{method}.json")


def live_for(result: RunResult, clock=None) -> LiveRun:
    params = DecodeParams.from_json(result.params)
    return LiveRun(params, result.prompt, clock=clock or Clock())


def test_status_follows_the_phases():
    result = recorded("spec")
    live = live_for(result)
    total = live.params.max_new_tokens
    assert live.status == "starting …" and live.fraction == 0.0

    live.enter(PhaseStarted("baseline", "Autoregressive baseline", total))
    live.add([Progress("baseline", 8, total), Progress("baseline", 12, total)])
    assert live.status == f"baseline: autoregressive reference, 12/{total} tokens"
    assert live.fraction == pytest.approx(12 / total)
    assert not live.views_cleared and live.iterations == []

    live.enter(PhaseStarted("method", "spec", total))
    assert live.views_cleared
    assert live.status == f"Speculative: 0/{total} tokens" and live.fraction == 0.0


def test_after_the_last_token_the_curve_phase_counts_its_forwards_and_the_run_time_stops():
    result = recorded("spec")
    clock = Clock()
    live = live_for(result, clock)
    live.enter(PhaseStarted("method", "spec", live.params.max_new_tokens, paired=True))
    live.add(result.method.iters)
    clock.now += 4.0
    live.enter(PhaseStarted("curve", "T(k)", 32))
    assert live.measuring and live.phase == "method" and live.fraction == 0.0
    live.add([Progress("curve", 8, 32)])
    clock.now += 3.0  # the curve's seconds are not the run's
    assert live.fraction == pytest.approx(0.25) and live.elapsed() == pytest.approx(4.0)
    assert live.status == (f"Speculative: done, {len(result.method.ids)} tokens in 4.0 s · measuring T(k), the "
                           "verify cost by width (8/32 forwards) …")
    assert live.tokens == len(result.method.ids)  # the curve's progress is no token


def test_a_reused_baseline_says_so():
    live = live_for(recorded("pld"))
    live.enter(PhaseStarted("baseline", "Autoregressive baseline", 48, cached=True))
    assert live.status == "baseline: reusing the autoregressive run measured for this prompt"


@pytest.mark.parametrize("method", ["ar", "spec", "pld", "jacobi"])
def test_batches_add_up_to_the_recorded_run(method):
    result = recorded(method)
    live = live_for(result)
    live.enter(PhaseStarted("method", method, live.params.max_new_tokens))
    iters = result.method.iters
    seen = []
    for start in range(0, len(iters), 3):  # batches of three iterations
        seen.extend(live.add(iters[start:start + 3]))
        assert live.tokens == sum(len(it.emit) for it in iters[:start + 3])
    assert seen == iters and live.iterations == iters
    assert live.tokens == result.summary.tokens == len(live.output_tokens)
    assert live.output_tokens == list(result.method.tokens)
    assert live.fraction == pytest.approx(live.tokens / live.params.max_new_tokens)
    assert live.status.endswith(f": {live.tokens}/{live.params.max_new_tokens} tokens")
    figures = live.figures()
    assert figures["tokens"] == result.summary.tokens
    assert figures["iterations"] == result.summary.iterations
    assert figures["accept_rate"] == result.summary.accept_rate


def test_the_table_catches_up_at_most_once_per_interval():
    clock = Clock()
    result = recorded("spec")
    live = live_for(result, clock)
    iters = result.method.iters
    live.enter(PhaseStarted("method", "spec", live.params.max_new_tokens))
    live.add(iters[:2])
    assert live.slow_panes_due()  # the first batch is drawn at once
    assert live.take_rows() == iters[:2]
    live.add(iters[2:4])
    clock.now += live.slow_pane_interval / 2
    assert not live.slow_panes_due()
    live.add(iters[4:5])
    clock.now += live.slow_pane_interval / 2
    assert live.slow_panes_due()
    assert live.take_rows() == iters[2:5]  # every row since the last draw, once
    assert live.take_rows() == [] and not live.slow_panes_due()


def test_elapsed_runs_from_the_start():
    clock = Clock()
    live = live_for(recorded("ar"), clock)
    clock.now += 2.5
    assert live.elapsed() == pytest.approx(2.5)
