"""The bench measures as the app does: each row paired with its own baseline, interleaved, and each
prompt warmed up before any of it is timed (issue 36).

A simulated machine stands in for the real one (as in tests/engine/test_pairing.py): every forward
advances an injected clock by a cost model, times the machine's speed at that moment, and a prefill
longer than any before it pays for the positions it adds (what the first decode of a prompt pays on
a real machine: the allocator's first blocks of its shapes). The clock is simulated and greedy
decoding deterministic, so the figures are exact, not timed."""

from __future__ import annotations

import dataclasses
import json

import pytest

from decoders.backends.hf import twin_of
from decoders.bench import load_prompts, run_bench
from decoders.bench.common import BASELINE
from decoders.bench.drafts import Row
from decoders.bench.measure import AGAIN, PromptMeasurer
from decoders.bench.prompts import BenchPrompt
from decoders.bench.reference import HFRun
from decoders.bench.variants import Variant
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from tests.support.engine import PROMPT, tiny_family

STEP_MS = 50.0  # a one-token target step on the simulated machine
PER_POSITION = 0.3  # each extra position of a forward costs this share of a step
COLD_MS = 20.0  # what each position of a prefill longer than any before costs on top (once per process)
BASE = DecodeParams(method=BASELINE, max_new_tokens=24, mode="greedy", record=False, draft_policy="fixed")


class Machine:
    """A clock that only forwards advance; ``speed(now)`` > 1 makes work take longer. ``log``: every
    forward as (backend name, positions, cached positions before it, inside a warm-up)."""

    def __init__(self, speed=lambda now: 1.0):
        self.now = 0.0
        self.speed = speed
        self.paid = 0  # the longest prefill so far: the allocator's high-water mark
        self.log: list[tuple[str, int, int, bool]] = []
        self.warming = False

    def clock(self) -> float:
        return self.now

    def spend(self, ms: float) -> None:
        self.now += ms / 1000 * self.speed(self.now)


class Timed:
    """A backend whose forwards take simulated time on ``machine``; everything else is the wrapped one's."""

    def __init__(self, inner, machine: Machine, name: str, share: float = 1.0):
        self.inner, self.machine, self.name, self.share = inner, machine, name, share

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def cached_length(self) -> int:
        return self.inner.cached_length

    def forward(self, ids, keep, positions=None, mask=None):
        n, start = int(ids.numel()), self.inner.cached_length
        cold = max(0, n - self.machine.paid) if start == 0 else 0
        self.machine.paid += cold
        self.machine.log.append((self.name, n, start, self.machine.warming))
        self.machine.spend(self.share * (STEP_MS * (1 + PER_POSITION * (n - 1)) + COLD_MS * cold))
        return self.inner.forward(ids, keep, positions, mask)

    def twin(self):
        return Timed(twin_of(self.inner), self.machine, "twin", self.share)


class NoReference:
    """A reference with no counterparts; its greedy run is a fixed record (not timed here)."""

    name = "stub"
    early_exit_layer = None

    def counterpart(self, method, params):
        return None

    def greedy(self, ids, max_new_tokens):
        return HFRun(method=BASELINE, label="stub", ids=[1] * max_new_tokens, wall_ms=float(max_new_tokens),
                     target_forwards=max_new_tokens, draft_forwards=0, finish="length")

    def run(self, method, ids, params):
        return None


def measured(machine: Machine, warm: bool = True, twin: bool = True):
    """One prompt through the bench's measurer on the simulated machine: a speculative row, a prompt
    lookup row, then autoregressive decoding again. Returns (sample, engine)."""
    family = tiny_family(fast=True)
    main = Timed(family.main, machine, "main")
    if not twin:
        main.twin = None  # a backend that cannot make a second cache
    family = dataclasses.replace(family, main=main, helper=Timed(family.helper, machine, "helper", share=0.1))
    engine = Engine(family, clock=machine.clock)
    warm_of = engine.warm

    def warming(*args, **kwargs):
        machine.warming = True
        try:
            return warm_of(*args, **kwargs)
        finally:
            machine.warming = False

    engine.warm = warming
    engine.twin_runner()
    reference = NoReference()
    rows = [Row(Variant(m), BASE.replace(method=m, gamma=3), family, reference) for m in ("spec", "pld")]
    measurer = PromptMeasurer(family, rows, BASE, [], lambda what: None, reference, engine, warm=warm)
    prompt = BenchPrompt(question_id=1, category="writing", text=PROMPT)
    ids = engine.prompt_ids(PROMPT, BASE)
    return measurer.measure(prompt, ids, 0, flip=False, record_twins=False), engine


def test_each_row_is_paired_with_its_own_baseline_decoded_between_its_iterations():
    """On a machine that keeps slowing down, a row timed late against a baseline timed early would
    read slower than it is; each row's own baseline, stepped between its iterations on the twin,
    is slowed alike: autoregressive decoding again reads 1.00x, and every row's speedup is over its
    own baseline (the same tokens, the same seconds)."""
    machine = Machine(lambda now: 1.0 + now / 4.0)
    sample, engine = measured(machine)
    assert sample.pairing == "interleaved" and set(sample.own_baselines) == {"spec", "pld", AGAIN}
    for label in ("spec", "pld", AGAIN):
        entry, own = sample.ours[label], sample.own_baselines[label]
        assert own.ids == entry.ids  # the baseline decoded as far as the row emitted
        assert entry.speedup == round(own.ms_per_token / entry.ms_per_token, 4)
    again = sample.ours[AGAIN]
    assert again.speedup == pytest.approx(1.0, abs=0.03)
    # the prompt's first baseline, timed while the machine was quicker, would have said otherwise
    assert sample.ours[BASELINE].ms_per_token / again.ms_per_token < 0.8
    # the twin's forwards come between the main model's, not in a block before them
    timed = [name for name, *_, warming in machine.log if not warming and name in ("main", "twin")]
    switches = sum(a != b for a, b in zip(timed, timed[1:], strict=False))
    assert switches >= len(again.ids)


def test_each_prompt_is_warmed_up_before_its_first_timed_forward():
    """The first prefill of a prompt pays more than its second: the warm-up pays it, untimed, on every
    runner the rows use (main, twin, helper), so the first row reads as it would on a warm prompt."""
    machine = Machine()
    sample, engine = measured(machine)
    for name in ("main", "twin", "helper"):
        prefills = [warming for who, n, start, warming in machine.log
                    if who == name and start == 0 and n >= sample.prompt_tokens]
        assert prefills and prefills[0] is True, name  # the first prefill of each runner is the warm-up's
        assert not all(prefills), name  # and the timed runs come after it
    assert sample.ours["spec"].speedup == pytest.approx(_warm_truth("spec"), rel=1e-3)


def _warm_truth(label: str) -> float:
    """The row's speedup on a machine where every prefill length was already paid for."""
    machine = Machine()
    machine.paid = 128
    sample, _ = measured(machine, warm=False)
    return sample.ours[label].speedup


def test_without_the_warm_up_the_first_row_reads_faster_than_it_is():
    """What the warm-up fixes (this guards the test above: the cold cost is one that matters): the
    baseline prefills first in a pair and pays the prompt's first prefill alone."""
    sample, _ = measured(Machine(), warm=False)
    assert sample.ours["spec"].speedup > _warm_truth("spec") * 1.05


def test_a_backend_without_a_twin_is_measured_sequentially_and_says_so():
    sample, engine = measured(Machine(), twin=False)
    assert sample.pairing == "sequential" and not sample.baselines
    assert engine.no_twin and "cannot run a second cache" in engine.no_twin
    for label in ("spec", "pld", AGAIN):  # every row over the prompt's one baseline
        entry = sample.ours[label]
        assert entry.speedup == round(sample.ours[BASELINE].ms_per_token / entry.ms_per_token, 4)


PROMPTS = [
    {"question_id": 81, "category": "writing", "turns": ["w5 w6 w7 w8 w5 w6 w7 w8 w5 w6"]},
    {"question_id": 481, "category": "rag", "turns": ["w9 w10 w11 w12 w9 w10 w11 w12 w9"]},
]
QUICK = dict(max_new_tokens=6, record_overhead_every=0, bandwidth_bytes=1 << 22)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from decoders.models.family import FamilySpec, load_family
    from tests.support.tiny import save_tiny_model

    folder = save_tiny_model(tmp_path_factory.mktemp("pairing") / "model", layers=2)
    path = tmp_path_factory.mktemp("prompts") / "two.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return load_family(FamilySpec(name="t", main=str(folder), device="cpu")), load_prompts(str(path))


def test_the_report_names_each_rows_pairing(tiny):
    from decoders.bench.report import render_markdown

    family, prompts = tiny
    report = run_bench(family, prompts, methods="ar,pld", warm_up=False, **QUICK)
    assert report.settings.pairing == {"ar": "interleaved", AGAIN: "interleaved", "pld": "interleaved"}
    assert all(s.pairing == "interleaved" and set(s.own_baselines) == {"pld", AGAIN} for s in report.samples)
    md = render_markdown(report)
    assert "- pairing: every row interleaved: each with its own autoregressive baseline" in md


def test_the_sequential_fallback_is_named_in_the_report(tiny, monkeypatch):
    from decoders.bench.report import render_markdown

    family, prompts = tiny
    monkeypatch.setattr(type(family.main), "twin", None)  # this backend cannot make a second cache
    report = run_bench(family, prompts, methods="ar,pld", warm_up=False, **QUICK)
    assert set(report.settings.pairing.values()) == {"sequential"}
    assert all(s.pairing == "sequential" and not s.baselines for s in report.samples)
    assert any(n.startswith("rows paired sequentially (") and "cannot run a second cache" in n for n in report.notes)
    md = render_markdown(report)
    assert "- pairing: every row sequential: against the prompt's one autoregressive baseline" in md


def test_a_report_of_rows_paired_differently_names_each_rows_pairing():
    from decoders.bench.report import pairing_line

    line = pairing_line({"ar [torch]": "interleaved", "pld [torch]": "interleaved", "ar [llama.cpp]": "sequential"},
                        ["ar [torch]", "pld [torch]", "ar [llama.cpp]"])
    assert line.startswith("- pairing: Autoregressive [torch], Prompt lookup [torch] interleaved: ")
    assert "; Autoregressive [llama.cpp] sequential: " in line
    assert "not recorded" in pairing_line(None, ["ar"])  # a report from before: it paired sequentially


def test_the_sweep_pairs_each_value_with_its_own_baseline_after_warming_each_prompt(tiny, monkeypatch):
    from decoders.bench.measure import OursEntry
    from decoders.bench.sweep import parse_sweep, run_sweep

    family, prompts = tiny
    calls, warm, run = [], Engine.warm, Engine.run

    def warming(self, prompt, params, *args, **kwargs):
        calls.append(("warm", prompt))
        return warm(self, prompt, params, *args, **kwargs)

    def running(self, prompt, params):
        result = run(self, prompt, params)
        calls.append(("run", prompt, result))
        return result

    monkeypatch.setattr(Engine, "warm", warming)
    monkeypatch.setattr(Engine, "run", running)
    report = run_sweep(family, prompts, parse_sweep("num_pred=2,3"), max_new_tokens=10,
                       params=DecodeParams(draft_policy="fixed"))
    assert report.settings.pairing == "interleaved"
    timed = [c for c in calls if c[0] == "warm" or c[2].params["max_new_tokens"] == 10]  # not the start's warm-up
    texts = [p.text for p in prompts]
    assert [c[:2] for c in timed] == [(kind, text) for text in texts for kind in ("warm", "run", "run")]
    for value in (2, 3):
        results = [c[2] for c in timed if c[0] == "run" and c[2].params["num_pred"] == value]
        for sample, result in zip(report.samples[value], results, strict=True):
            assert result.summary.pairing == "interleaved"
            own = OursEntry.of_baseline(result).ms_per_token  # its own baseline, decoded beside it
            assert sample.speedup == round(own / sample.ms_per_token, 4)
