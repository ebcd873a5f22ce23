"""The bench report judges only what its figures can carry: too few runs are not judged, the
theorem only where its premise (a full draft of γ every iteration) holds, and a speedup inside its
spread is flagged as noise in the speedup column itself."""

from __future__ import annotations

from decoders.bench.cells import speedup_cell as _speedup_cell
from decoders.bench.measure import Theorem
from decoders.bench.targets import MIN_RUNS_TO_JUDGE, Target, _theorem_target, evaluate_targets
from decoders.core.declarations import get_method


class Side:
    def __init__(self, theorem: Theorem, speedup: float = 1.1):
        self.theorem, self.speedup = theorem, speedup
        self.predicted_speedup, self.predicted_speedup_cost_aware = theorem.predicted_speedup, None
        self.alpha_hat, self.c_hat, self.verify_cost = theorem.alpha_hat, theorem.c_hat, 1.2


class Stats:
    def __init__(self, theorem: Theorem, speedup: float = 1.1):
        self.ours = Side(theorem, speedup)


def theorem(**premise) -> Theorem:
    return Theorem(alpha_hat=0.8, c_hat=0.1, predicted_speedup=1.1, predicted_speedup_cost_aware=None, **premise)


def test_the_theorem_is_judged_only_where_its_premise_holds():
    spec = get_method("spec")
    adaptive = _theorem_target("spec", spec, "thm", Stats(theorem(gamma=4, mean_drafted=2.6, plain_steps=3.5)))
    assert adaptive.met is None and adaptive.margin.startswith("not judged: 3.5 plain steps a run")
    shortened = _theorem_target("spec", spec, "thm", Stats(theorem(gamma=4, mean_drafted=2.6, plain_steps=0)))
    assert shortened.met is None and "the draft length varied" in shortened.margin
    fixed = _theorem_target("spec", spec, "thm", Stats(theorem(gamma=4, mean_drafted=3.9, plain_steps=0)))
    assert fixed.met is True and fixed.margin == "+0% off the prediction"


def test_too_few_runs_are_not_judged(monkeypatch):
    import decoders.bench.targets as targets

    made = Target("x", "a target", "goal", "1.00x", False, "missed by 0.2")
    monkeypatch.setattr(targets, "_ar_target", lambda *a: made)
    monkeypatch.setattr(targets, "_noise_target", lambda *a: None)
    monkeypatch.setattr(targets, "_record_target", lambda *a: None)

    class Figures:
        overall = {"ar": None}
        groups = {}

    few = evaluate_targets(Figures(), [], samples=[object()] * (MIN_RUNS_TO_JUDGE - 2))
    assert few[0].met is None and few[0].margin == (f"too few runs to judge (2 prompt runs; {MIN_RUNS_TO_JUDGE} or "
                                                    "more judge it); as measured: missed by 0.2")
    enough = evaluate_targets(Figures(), [], samples=[object()] * MIN_RUNS_TO_JUDGE)
    assert enough[0].met is False and enough[0].margin == "missed by 0.2"


def test_a_speedup_inside_its_spread_is_flagged_in_the_speedup_column():
    assert _speedup_cell(1.19, 0.25, "pld", 0.0) == "1.19x (noise: nothing accepted)"
    assert _speedup_cell(1.19, 0.25, "pld", 0.4) == "1.19x (noise)"
    assert _speedup_cell(1.40, 0.25, "pld", 0.4) == "1.40x"
    assert _speedup_cell(1.00, 0.02, "ar", None) == "1.00x"  # the baseline row is 1.00x by definition
