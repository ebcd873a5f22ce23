"""train-head's last word: what the new head buys on this machine (a short run with it, and the
cost-aware Theorem 3.8 from the held-out acceptance and the run's measured costs)."""

from __future__ import annotations

import pytest

from decoders.analysis.theory import cost_aware_speedup
from decoders.engine import Engine
from decoders.training.predict import heldout_speedup, on_this_machine, sentence
from tests.engine.test_head_drafts import head_family


def test_the_heldout_prediction_is_the_chain_of_per_depth_acceptances_over_the_measured_cost():
    # 1 + 0.5 + 0.5*0.4 tokens over 2 head steps of 0.1 and a verify of 1.3
    assert heldout_speedup([0.5, 0.4], 2, 0.1, 1.3) == pytest.approx(1.7 / 1.5)
    # one acceptance for every depth is Theorem 3.8's own alpha
    assert heldout_speedup([0.6], 3, 0.2, 1.5) == pytest.approx(cost_aware_speedup(0.6, 3, 0.2, 1.5))
    assert heldout_speedup([], 2, 0.1, 1.2) == pytest.approx(1 / 1.4)
    # a catch-up of 0.1 target steps for each of the 1.7 tokens an iteration yields
    assert heldout_speedup([0.5, 0.4], 2, 0.1, 1.3, 0.1) == pytest.approx(1.7 / (1.5 + 0.17))


def test_a_run_with_the_head_gives_its_costs_and_both_predictions(tmp_path):
    engine = Engine(head_family(tmp_path, "eagle3", fast=True), pairing="sequential")
    f = on_this_machine(engine, [0.5, 0.3, 0.2], gamma=3, max_new_tokens=12, prompt="a b c")
    assert f["gamma"] == 3 and f["tokens"] == 12
    assert f["c_hat"] > 0 and f["verify_cost"] > 0 and f["tau"] >= 1.0
    u = f["catch_up_cost"]  # the head's layer over the verified positions, timed apart from its steps
    assert u > 0
    assert f["predicted_heldout"] == pytest.approx(heldout_speedup([0.5, 0.3, 0.2], 3, f["c_hat"], f["verify_cost"], u),
                                                   abs=1e-3)
    if f["break_even_alpha"] is not None:  # the least acceptance at which the chain pays, to the percent
        a = f["break_even_alpha"]
        assert heldout_speedup([a], 3, f["c_hat"], f["verify_cost"], u) >= 1.0
        assert a == 0 or heldout_speedup([a - 0.01], 3, f["c_hat"], f["verify_cost"], u) < 1.0
    line = sentence(f)
    assert "Theorem 3.8 (cost-aware) predicts" in line and f"{f['c_hat']:.2f} target steps" in line
    assert "over autoregressive" in line
