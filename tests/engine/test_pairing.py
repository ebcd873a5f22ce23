"""The speedup survives a machine that changes speed mid-run: the baseline steps in alternation
with the method on a second cache (interleaved pairing), so both are timed in the same seconds.

A simulated machine stands in for the real one: every forward advances an injected clock by a
cost model (a one-token step, plus a share per extra position, as a verify forward costs on a
CPU), times the machine's speed at that moment. The true speedup is the one measured on a machine
whose speed never changes; the tests slow the machine down (and speed it up) in the middle of the
method's run and check that the reported speedup stays inside its spread of the truth, where the
sequential pairing (a cached baseline rescaled by a probe after the run) does not."""

from __future__ import annotations

import dataclasses

import pytest

from decoders.backends.hf import twin_of
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from tests.support.engine import PROMPT, tiny_family

STEP_MS = 50.0  # a one-token target step on the simulated machine
PER_POSITION = 0.3  # each extra position of a forward costs this share of a step (a CPU's T(k))
HELPER_SHARE = 0.1  # a helper forward costs this share of the target's


class Machine:
    """A clock that only forwards advance; ``speed(now)`` > 1 makes work take longer."""

    def __init__(self, speed=lambda now: 1.0):
        self.now = 0.0
        self.speed = speed

    def clock(self) -> float:
        return self.now

    def spend(self, ms: float) -> None:
        self.now += ms / 1000 * self.speed(self.now)


class Timed:
    """A backend whose forwards take simulated time on ``machine``; everything else is the
    wrapped backend's."""

    def __init__(self, inner, machine: Machine, step_ms: float):
        self.inner, self.machine, self.step_ms = inner, machine, step_ms

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def cached_length(self) -> int:
        return self.inner.cached_length

    def forward(self, ids, keep, positions=None, mask=None):
        self.machine.spend(self.step_ms * (1 + PER_POSITION * (int(ids.numel()) - 1)))
        return self.inner.forward(ids, keep, positions, mask)

    def twin(self):
        return Timed(twin_of(self.inner), self.machine, self.step_ms)

    def early_exit(self, layers: int):
        return Timed(self.inner.early_exit(layers), self.machine, self.step_ms)


def simulated(machine: Machine, pairing: str = "interleaved", helper_noise: float = 0.05) -> Engine:
    family = tiny_family(fast=True, helper_noise=helper_noise)
    family = dataclasses.replace(family, main=Timed(family.main, machine, STEP_MS),
                                 helper=Timed(family.helper, machine, STEP_MS * HELPER_SHARE))
    return Engine(family, clock=machine.clock, pairing=pairing)


PARAMS = DecodeParams(method="spec", gamma=3, max_new_tokens=96, draft_policy="fixed")


def true_speedup(method: str = "spec") -> float:
    """The speedup on a machine whose speed never changes (identical on every run: the clock is
    simulated and greedy decoding is deterministic)."""
    result = simulated(Machine()).run(PROMPT, PARAMS.replace(method=method))
    assert result.summary.pairing == "interleaved"
    return result.summary.speedup_decode


def change_mid_run(factor: float, after_s: float) -> Machine:
    return Machine(lambda now: factor if now >= after_s else 1.0)


def test_greedy_output_and_token_counts_are_those_of_the_plain_run():
    machine = Machine()
    paired = simulated(machine).run(PROMPT, PARAMS)
    plain = simulated(Machine(), pairing="sequential").run(PROMPT, PARAMS)
    assert paired.method.ids == plain.method.ids and paired.baseline.ids == plain.baseline.ids
    assert paired.summary.identical is True and paired.baseline.finish == plain.baseline.finish
    assert paired.summary.drift is None and paired.summary.machine_change == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("factor", [2.0, 0.5], ids=["slows-down", "speeds-up"])
def test_a_machine_that_changes_speed_mid_run_leaves_the_speedup_within_its_spread(factor):
    truth = true_speedup()
    quiet = simulated(Machine()).run(PROMPT, PARAMS)
    half = quiet.method.time_ms["wall"] / 1000  # the method's own time: the switch falls inside it
    result = simulated(change_mid_run(factor, half)).run(PROMPT, PARAMS)
    s = result.summary
    assert s.speedup_spread is not None
    assert abs(s.speedup_decode - truth) <= s.speedup_spread, (s.speedup_decode, truth, s.speedup_spread)
    # the machine did change: the baseline's own steps say so (last third against first)
    assert s.machine_change == pytest.approx(factor, rel=0.35)


@pytest.mark.parametrize("factor", [2.0, 0.5], ids=["slows-down", "speeds-up"])
def test_the_sequential_pairing_is_fooled_by_the_same_change(factor):
    """What the interleaved pairing fixes: a baseline decoded before the method, rescaled by a
    probe after it, is off by the change inside the method's run (this test guards the test above:
    its machine change is one that matters)."""
    truth = true_speedup()
    engine = simulated(Machine(), pairing="sequential")
    engine.run(PROMPT, PARAMS.replace(max_new_tokens=96))  # the baseline, cached on a quiet machine
    start = engine.main.clock()
    quiet_method = simulated(Machine()).run(PROMPT, PARAMS).method.time_ms["wall"] / 1000
    engine.family.main.machine.speed = lambda now: factor if now >= start + quiet_method / 2 else 1.0
    s = engine.run(PROMPT, PARAMS).summary
    assert abs(s.speedup_decode - truth) > (s.speedup_spread or 0.0), (s.speedup_decode, truth, s.speedup_spread)


def test_autoregressive_against_its_own_interleaved_baseline_reads_one():
    result = simulated(change_mid_run(3.0, 1.0)).run(PROMPT, PARAMS.replace(method="ar"))
    s = result.summary
    assert s.speedup_decode == pytest.approx(1.0, abs=0.02)
    assert s.speedup_spread is not None and abs(s.speedup_decode - 1.0) <= max(s.speedup_spread, 0.02)


def test_the_idle_hook_runs_off_both_clocks_and_names_the_next_run():
    """A consumer's slow work at the engine's quiet points (100 s of it, on the same simulated
    clock) lands on neither run: the times, the speedup and the output are those of a run without it."""
    plain = simulated(Machine()).run(PROMPT, PARAMS)
    machine = Machine()
    engine = simulated(machine)
    calls: list[str] = []

    def idle(next_run: str) -> None:
        calls.append(next_run)
        machine.now += 100.0

    result = None
    for event in engine.stream(PROMPT, PARAMS, idle=idle):
        result = event
    assert result is not None and result.method.ids == plain.method.ids
    assert set(calls[:-1]) == {"method", "baseline"} and len(calls) >= result.summary.iterations
    assert calls[-1] == "end" and calls.count("end") == 1  # after the last timed step (the UI may run)
    assert result.method.time_ms["wall"] == pytest.approx(plain.method.time_ms["wall"], abs=1e-6)
    assert result.baseline.time_ms["wall"] == pytest.approx(plain.baseline.time_ms["wall"], abs=1e-6)
    assert result.summary.speedup_decode == plain.summary.speedup_decode


def test_a_cancelled_run_is_compared_over_the_tokens_both_produced():
    machine = Machine()
    engine = simulated(machine)
    seen = []

    def cancelled():
        return len(seen) >= 5

    result = None
    for event in engine.stream(PROMPT, PARAMS, cancelled):
        if hasattr(event, "emit"):
            seen.append(event)
        if hasattr(event, "summary"):
            result = event
    assert result is not None and result.method.finish == "cancelled"
    n = result.summary.compared_tokens
    assert n == min(len(result.method.ids), len(result.baseline.ids)) and n > 0
    assert len(result.baseline.ids) <= len(result.method.ids) + 1


def test_a_backend_without_a_twin_is_paired_sequentially_and_says_why():
    machine = Machine()
    engine = simulated(machine)
    engine.family.main.twin = None  # a backend that cannot make a second cache
    result = engine.run(PROMPT, PARAMS)
    assert result.summary.pairing == "sequential" and "cannot run a second cache" in engine.no_twin


# -- the sentence under the figures ------------------------------------------------------------------

VERDICT_WORDS = {"faster": "faster than autoregressive", "slower": "slower than autoregressive",
                 "even": "No measurable difference from autoregressive"}


@pytest.mark.parametrize(("helper_share", "noise"), [(0.05, 0.05), (0.8, 0.05), (0.5, 0.0)],
                         ids=["cheap-helper", "costly-helper", "costly-but-always-right"])
@pytest.mark.parametrize("params", [PARAMS, PARAMS.replace(gamma=1), PARAMS.replace(method="pld"),
                                    PARAMS.replace(method="ar")], ids=["spec-g3", "spec-g1", "pld", "ar"])
def test_the_sentence_states_the_verdict_of_the_figures_above_it(params, helper_share, noise, monkeypatch):
    from decoders.analysis.timing import verdict

    monkeypatch.setattr(f"{__name__}.HELPER_SHARE", helper_share)
    s = simulated(Machine(), helper_noise=noise).run(PROMPT, params).summary
    v = verdict(s.speedup_decode, s.speedup_spread)
    assert VERDICT_WORDS[v] in s.explanation.split(":")[0], (v, s.speedup_decode, s.speedup_spread, s.explanation)
    predicted = s.extras.get("predicted_speedup_cost_aware")
    if "cannot pay for itself" in s.explanation:
        assert predicted is not None and predicted < 1.0
    if predicted is not None:
        assert f"predicts {predicted:.2f}x" in s.explanation


def test_end_to_end_carries_the_prefills_own_noise():
    """The same prompt's prefill timed 947 and 488 ms: the end-to-end speedup (1.27x) is inside its
    spread, as the decode speedup (1.00x) is inside its own; neither is called faster."""
    from decoders.analysis.summary import summarize
    from decoders.analysis.timing import verdict
    from tests.engine.test_timing import timed_run

    steps = [40.0 + (i % 3) for i in range(30)]
    baseline, method = timed_run([947.0] + steps), timed_run([488.0] + steps)
    s = summarize(method, baseline, DecodeParams(method="ar"), pairing="interleaved")
    assert s.speedup_wall == pytest.approx(1.27, abs=0.01) and s.speedup_decode == pytest.approx(1.0, abs=0.01)
    assert verdict(s.speedup_wall, s.speedup_wall_spread) == "even", (s.speedup_wall, s.speedup_wall_spread)
    assert verdict(s.speedup_decode, s.speedup_spread) == "even"
    quiet = summarize(timed_run([488.0] + steps), timed_run([490.0] + steps), DecodeParams(method="ar"),
                      pairing="interleaved")
    assert quiet.speedup_wall_spread is not None and quiet.speedup_wall_spread < 0.1  # equal prefills: tight
