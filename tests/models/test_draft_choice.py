"""The default draft ("fastest"): the drafts a family can have are measured at load and the one
Theorem 3.8 predicts fastest here drafts; what was measured is kept and said."""

from __future__ import annotations

import json

import pytest

from decoders.analysis.theory import chain_speedup
from decoders.backends.heads import head_draft
from decoders.core.errors import DecodeError
from decoders.models.backend_choice import make_backend
from decoders.models.draft_choice import best_chain, choose, choose_for_family, head_acceptance
from decoders.models.family import FamilySpec
from tests.support.engine import peaked_model
from tests.support.heads import write_head

SEQ = [5, 9, 13, 22, 7, 31, 40, 11, 3, 17, 29, 33, 8, 12, 50, 61]


def test_the_best_chain_is_theorem_3_8_at_the_measured_costs():
    curve = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]
    gamma, speed = best_chain([0.9], 0.1, curve)
    assert speed == max(chain_speedup([0.9], g, 0.1, curve[g]) for g in range(1, 8))
    assert gamma == max(range(1, 8), key=lambda g: chain_speedup([0.9], g, 0.1, curve[g]))
    # 1 + 0.5 + 0.25 tokens over 2 * 0.2 + T(3) 1.2
    assert chain_speedup([0.5, 0.5], 2, 0.2, 1.2) == pytest.approx(1.75 / 1.6)
    assert best_chain([0.05], 0.5, curve)[0] == 1  # a bad draft: the shortest chain loses least


def test_a_heads_acceptance_comes_from_its_training_report(tmp_path):
    assert head_acceptance(None) is None and head_acceptance(str(tmp_path)) is None
    (tmp_path / "training.json").write_text(json.dumps({"accept_per_depth": [0.4, 0.3]}))
    assert head_acceptance(str(tmp_path)) == [0.4, 0.3]
    for broken in ("{", json.dumps({"accept_per_depth": ["x"]}), json.dumps({"accept_per_depth": [1.5]}),
                   json.dumps({"accept_per_depth": []}), json.dumps([1])):
        (tmp_path / "training.json").write_text(broken)
        assert head_acceptance(str(tmp_path)) is None, broken


def test_of_two_drafts_that_cost_the_same_the_better_accepted_is_chosen(tmp_path):
    """Timing is real (tiny models), so the two candidates are the same head: only the acceptance
    tells them apart, and the record holds the measured c, T(k), γ and predictions of both."""
    model = peaked_model(layers=5)
    write_head(tmp_path / "h", "eagle3")
    main = make_backend(model, fast=True)
    poor = head_draft(tmp_path / "h", main, model)
    good = head_draft(tmp_path / "h", main, model)
    choice = choose(main, {"poor": (poor, "poor head", [0.02]), "good": (good, "good head", [0.95, 0.9])}, SEQ,
                    {"int4": ("int4 self-draft", "the shapes do not fit")})
    assert choice.chosen == "good"
    by_kind = {c.kind: c for c in choice.candidates}
    assert by_kind["good"].predicted > by_kind["poor"].predicted
    assert 0 < by_kind["good"].c < 20 and by_kind["good"].gamma >= 1 and len(choice.curve) == 8
    assert choice.curve[0] == 1.0 and choice.step_ms > 0
    text = choice.sentence()
    assert text.startswith(f"good head: predicted {by_kind['good'].predicted:.2f}x at γ {by_kind['good'].gamma}")
    assert "poor head" in text and "int4 self-draft left out (the shapes do not fit)" in text


def test_the_family_choice_leaves_out_what_it_cannot_judge_and_says_so(tmp_path, monkeypatch):
    """An int4 copy that cannot be built (here: said so by the quantizer), and a head without
    training.json has no acceptance to judge it by; with nothing left it is one line, with the
    report the head drafts."""
    import decoders.models.backend_choice as backend_choice

    def no_int4(*args):
        raise DecodeError("Cannot build an int4 self-draft of this model: down_proj reads 40 inputs.")

    monkeypatch.setattr(backend_choice, "quantized_draft", no_int4)
    model = peaked_model(layers=5)
    main = make_backend(model, fast=True)
    write_head(tmp_path / "h", "eagle3")
    spec = FamilySpec(name="t", main="tiny", head=str(tmp_path / "h"), self_draft="fastest")

    def tokenizer(text):
        return {"input_ids": SEQ}

    with pytest.raises(DecodeError, match=r"No draft to choose the fastest of for this model \(int4 self-draft: "
                                          r"Cannot build an int4 self-draft.*no training.json beside it"):
        choose_for_family(spec, main, model, tokenizer, lambda *a: None)
    (tmp_path / "h" / "training.json").write_text(json.dumps({"accept_per_depth": [0.5, 0.4, 0.3]}))
    backend, source, kind, choice = choose_for_family(spec, main, model, tokenizer, lambda *a: None)
    assert kind == "head" and source.startswith("eagle3 head") and backend.max_positions > 0
    assert [c.kind for c in choice.candidates] == ["head", "int4"]
    assert choice.candidates[0].accept == [0.5, 0.4, 0.3]
    assert "int4 self-draft left out (Cannot build an int4 self-draft" in choice.sentence()


@pytest.mark.model
def test_on_the_bundled_model_int4_and_the_shipped_head_are_both_measured(smollm2):
    spec = FamilySpec(name="b", main="bundled", self_draft="fastest")
    backend, source, kind, choice = choose_for_family(spec, smollm2.main, smollm2.main_model, smollm2.tokenizer,
                                                      lambda *a: None)
    by_kind = {c.kind: c for c in choice.candidates}
    assert set(by_kind) == {"int4", "head"}
    assert by_kind["int4"].accept[0] > 0.9  # the int4 copy agrees with the target almost always
    assert by_kind["head"].accept == head_acceptance(smollm2.head_source)
    assert kind == max(by_kind.values(), key=lambda c: c.predicted).kind
    assert all(0 < c.c < 2 for c in by_kind.values())
    assert by_kind["head"].c < by_kind["int4"].c  # one layer against thirty
