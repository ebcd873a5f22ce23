"""Synthetic acceptance (`decoders.methods.synthetic`): a draft right with given per-position
rates, costing a given share of a step; the output stays the target's greedy output, the rows are
labelled synthetic, and it is registered only where asked for. Tiny in-memory models, seconds."""

from __future__ import annotations

import json

import pytest

from decoders.core.declarations import method_names
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.methods import synthetic
from decoders.records.kinds import STATUS_ACCEPTED
from tests.support.engine import PROMPT, tiny_family
from tests.support.tiny import save_tiny_model
from tui_decode.cli.main import main as cli_main


@pytest.fixture(scope="module")
def engine():
    return Engine(tiny_family(fast=True), pairing="sequential")


@pytest.fixture
def on():
    with synthetic.enabled():
        yield


def run(engine, rates, gamma=4, cost=0.0, tokens=24, seed=0):
    params = DecodeParams(method="synthetic", gamma=gamma, synthetic_acceptance=rates, synthetic_cost=cost,
                          max_new_tokens=tokens, seed=seed)
    return engine.run(PROMPT, params)


def accepted_per_iteration(result) -> list[int]:
    return [sum(row.status == STATUS_ACCEPTED for row in it.draft) for it in result.method.iters if it.draft]


def test_it_is_not_a_built_in_method_and_leaves_none_behind():
    assert "synthetic" not in method_names()
    with synthetic.enabled():
        assert "synthetic" in method_names()
    assert "synthetic" not in method_names()


def test_rate_one_accepts_every_draft_and_the_output_is_the_greedy_output(engine, on):
    result = run(engine, (1.0,))
    assert result.summary.identical is True
    assert result.method.ids == result.baseline.ids
    drafting = [it for it in result.method.iters if it.draft]
    assert drafting and all(len(it.draft) == 4 and len(it.emit) == 5 for it in drafting[:-1])
    assert result.summary.extras["alpha_hat"] == 1.0
    assert result.method.label == "Synthetic (acceptance 1, c=0, γ=4)"


def test_rate_zero_rejects_every_draft(engine, on):
    result = run(engine, (0.0,))
    assert result.method.ids == result.baseline.ids
    assert set(accepted_per_iteration(result)) == {0}
    assert result.summary.extras["alpha_hat"] == 0.0


def test_the_rates_are_per_position(engine, on):
    result = run(engine, (1.0, 1.0, 0.0), gamma=3)
    assert result.method.ids == result.baseline.ids
    counts = accepted_per_iteration(result)
    assert counts and set(counts[:-1]) == {2}  # the first two right, the third wrong, every iteration


def test_a_rate_between_draws_from_the_seed(engine, on):
    first, again = run(engine, (0.5,), seed=3), run(engine, (0.5,), seed=3)
    assert accepted_per_iteration(first) == accepted_per_iteration(again)
    assert len(set(accepted_per_iteration(first))) > 1
    assert first.method.ids == first.baseline.ids


def test_the_draft_costs_its_share_of_the_measured_step(engine, on, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(synthetic, "busy_wait", waits.append)
    result = run(engine, (1.0,), gamma=3, cost=0.25)
    step = result.method.time_ms["synthetic_step"] / 1000
    drafted = [len(it.draft) for it in result.method.iters if it.draft]
    assert step > 0 and waits == pytest.approx([g * 0.25 * step for g in drafted], rel=5e-3)
    assert result.summary.extras["c"] == 0.25


def test_the_theorem_is_set_beside_it(engine, on):
    extras = run(engine, (0.9, 0.8), gamma=3, cost=0.1).summary.extras
    assert extras["synthetic"] is True and extras["rates"] == "0.9,0.8"
    # 1 + 0.9 + 0.9*0.8 + 0.9*0.8*0.8 tokens for 3 * 0.1 + 1 steps
    assert extras["predicted_speedup"] == pytest.approx(3.196 / 1.3, abs=1e-3)
    assert extras["predicted_speedup_cost_aware"] == pytest.approx(3.196 / (0.3 + extras["verify_cost"]), abs=2e-3)
    assert extras["predicted_speedup_in_run"] == pytest.approx(3.196 / (0.3 + extras["verify_cost_in_run"]), abs=2e-3)


def test_a_reference_the_run_parts_from_is_decoded_again(engine, on, monkeypatch):
    real = synthetic.Oracle.decode_from
    calls = []

    def wrong_once(self, out):
        real(self, out)
        calls.append(len(out))
        if len(calls) == 1:  # the first reference is wrong from its sixth token on
            self.tokens[5:] = [(t + 7) % 64 for t in self.tokens[5:]]

    monkeypatch.setattr(synthetic.Oracle, "decode_from", wrong_once)
    result = run(engine, (1.0,))
    assert result.method.ids == result.baseline.ids
    assert result.summary.extras["reference_redecoded"] == 1 and calls == [0, 6]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("synthetic") / "model")


@pytest.fixture
def registry_restored():
    """The command line registers the synthetic method for the process; a test puts it back."""
    yield
    if synthetic.enabled_now():
        from decoders.core.declarations import unregister

        unregister("synthetic")


def test_the_command_line_runs_it_and_labels_it(tiny_folder, capsys, registry_restored):
    code = cli_main(["run", "--main", str(tiny_folder), "--synthetic-acceptance", "0.9,0.8", "--synthetic-cost",
                     "0.1", "--gamma", "3", "--max-new-tokens", "10", "--threads", "1", "--json", "-",
                     "--prompt", "w1 w2 w3 w1 w2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["runs"]["method"]["method"] == "synthetic" and data["params"]["synthetic_acceptance"] == [0.9, 0.8]
    assert data["runs"]["method"]["label"] == "Synthetic (acceptance 0.9,0.8, c=0.1, γ=3)"
    assert data["summary"]["identical"] is True


@pytest.mark.parametrize("flags,line", [
    (["--synthetic-acceptance", "1.2"],
     "synthetic_acceptance must be 1 to 64 numbers in 0..1, comma-separated, got 1.2; set --synthetic-acceptance "
     "to rates in 0..1"),
    (["--synthetic-acceptance", "0.9,-0.1"],
     "synthetic_acceptance must be 1 to 64 numbers in 0..1, comma-separated, got -0.1; set --synthetic-acceptance "
     "to rates in 0..1"),
    (["--synthetic-acceptance", "0.9,0.8,0.7", "--gamma", "2"],
     "synthetic acceptance gives 3 rates for γ=2 draft positions; give at most 2 rates or raise --gamma"),
    (["--synthetic-acceptance", "0.9,0.8", "--gamma", "1"],  # not "at most 1 rates" (issue 40's sweep, s02)
     "synthetic acceptance gives 2 rates for γ=1 draft position; give at most 1 rate or raise --gamma"),
    (["--synthetic-acceptance", "0.9", "--mode", "sampling"],
     "Synthetic acceptance decoding is greedy only; use --mode greedy, or --method"),
    (["--synthetic-cost", "0.1"], "--synthetic-cost needs --synthetic-acceptance RATES (e.g. 0.8 or 0.9,0.8,0.7)"),
    (["--synthetic-acceptance", "0.9", "--synthetic-cost", "5"],
     "synthetic_cost must be a number <= 4, got 5; set --synthetic-cost to 4 or less"),
    (["--synthetic-acceptance", "high"],
     "--synthetic-acceptance takes comma-separated numbers such as 0.9,0.8,0.7, got 'high'"),
])
def test_bad_synthetic_input_is_one_line(tiny_folder, capsys, registry_restored, flags, line):
    code = cli_main(["run", "--main", str(tiny_folder), "--prompt", "w1 w2", "--max-new-tokens", "4", *flags])
    err = capsys.readouterr().err
    assert code == 2 and line in err and err.strip().count("\n") == 0, err
