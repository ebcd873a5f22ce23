"""The default draft ("fastest"): the drafts a family can have are measured at load (their costs,
and their acceptance in greedy speculative decoding of requests from the project's prompt sets)
and the one Theorem 3.8 predicts fastest here drafts; what was measured is kept and said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decoders.analysis.theory import chain_speedup
from decoders.backends.heads import head_draft
from decoders.core.errors import DecodeError
from decoders.models.backend_choice import make_backend
from decoders.models.draft_choice import (
    Acceptance,
    best_chain,
    choice_prompt_ids,
    choice_prompts,
    choose,
    choose_for_family,
    measure_acceptance,
)
from decoders.models.drafts import Fastest, TrainedHead
from decoders.models.family import FamilySpec
from decoders.training.prompts import more_prompts, training_prompts
from tests.support.engine import peaked_model
from tests.support.heads import write_head
from tests.support.tiny import perturbed_copy, tiny_tokenizer

BENCH = Path(__file__).resolve().parents[2] / "bench"
CORPUS_INDEX = Path(__file__).resolve().parents[2] / "corpus" / "smollm2-135m-instruct" / "index.jsonl"

SEQ = [5, 9, 13, 22, 7, 31, 40, 11, 3, 17, 29, 33, 8, 12, 50, 61]


def test_the_best_chain_is_theorem_3_8_at_the_measured_costs():
    curve = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]
    gamma, speed = best_chain([0.9], 0.1, curve)
    assert speed == max(chain_speedup([0.9], g, 0.1, curve[g]) for g in range(1, 8))
    assert gamma == max(range(1, 8), key=lambda g: chain_speedup([0.9], g, 0.1, curve[g]))
    # 1 + 0.5 + 0.25 tokens over 2 * 0.2 + T(3) 1.2
    assert chain_speedup([0.5, 0.5], 2, 0.2, 1.2) == pytest.approx(1.75 / 1.6)
    assert best_chain([0.05], 0.5, curve)[0] == 1  # a bad draft: the shortest chain loses least


def test_acceptance_is_measured_per_depth_in_greedy_speculative_decoding():
    """A draft that is the target is accepted at every depth; a noisy copy less; depth d is judged
    only where depths 1..d-1 were accepted, and the greedy answer is the target's own."""
    model = peaked_model(layers=2)
    main = make_backend(model, fast=True)
    prompts = [SEQ[:8], SEQ[5:]]
    same, made = measure_acceptance(main, make_backend(perturbed_copy(model, 0.0), fast=True), prompts, new_tokens=10,
                                    gamma=3)
    assert same.per_depth() == [1.0, 1.0, 1.0] and made >= 20  # each prompt: its first token, then chains
    assert same.judged == same.accepted and same.judged[0] == same.judged[2] > 0
    noisy, _ = measure_acceptance(main, make_backend(perturbed_copy(model, 0.6, seed=2), fast=True), prompts,
                                  new_tokens=10, gamma=3)
    assert noisy.per_depth()[0] < 1.0
    assert noisy.judged[1] == noisy.accepted[0] and noisy.judged[2] == noisy.accepted[1]  # judged once reached
    assert Acceptance([0, 0], [0, 0]).per_depth() == [0.0]  # nothing judged: nothing accepted
    assert Acceptance([4, 2], [2, 1]).text(3, 36) == ("greedy speculative decoding (γ 2) of 3 requests from the "
                                                      "project's prompt sets, 36 tokens: 3 of 6 drafts judged were "
                                                      "accepted")


def test_the_requests_are_the_projects_own_never_the_benchs_nor_the_heads_training_prompts():
    prompts = choice_prompts()
    assert len(prompts) == 3 and len(set(prompts)) == 3
    bench_texts = set()
    for path in BENCH.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            bench_texts.update(turn.strip() for turn in row.get("turns", []) or [row.get("prompt", "")])
    assert bench_texts and not bench_texts & set(prompts)
    # the corpus answers training_prompts()[i] as "p{i}" and more_prompts()[i] as "q{i}": none of these
    answered = {json.loads(line)["key"] for line in CORPUS_INDEX.read_text(encoding="utf-8").splitlines()}
    first, second = training_prompts(), more_prompts()
    keys = {f"p{first.index(p)}" if p in first else f"q{second.index(p)}" for p in prompts}
    assert not keys & answered
    # as the app sends them: one user message in the chat template, cut to fit the context
    ids = choice_prompt_ids(tiny_tokenizer(64), 12)
    assert len(ids) == 3 and all(len(i) == 12 for i in ids)
    start = tiny_tokenizer(64).convert_tokens_to_ids("<|im_start|>")
    assert all(start in i for i in choice_prompt_ids(tiny_tokenizer(64), 500))
    assert not any(start in i for i in choice_prompt_ids(tiny_tokenizer(64, chat_template=False), 500))


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


def test_the_family_choice_measures_a_head_without_a_training_report_and_leaves_out_what_cannot_build(
        tmp_path, monkeypatch):
    """An int4 copy that cannot be built (here: said so by the quantizer) is left out, said in the
    record; a head is judged by its measured acceptance, with or without a training.json (the
    held-out acceptance it reports is not used); with no draft at all it is one line."""
    import decoders.models.backend_choice as backend_choice

    def no_int4(*args):
        raise DecodeError("Cannot build an int4 self-draft of this model: down_proj reads 40 inputs.")

    monkeypatch.setattr(backend_choice, "quantized_draft", no_int4)
    model = peaked_model(layers=5)
    main = make_backend(model, fast=True)
    write_head(tmp_path / "h", "eagle3")
    spec = FamilySpec(name="t", main="tiny", draft=Fastest(head=TrainedHead(folder=str(tmp_path / "h"))))
    tokenizer = tiny_tokenizer(64)
    backend, source, kind, choice = choose_for_family(spec, main, model, tokenizer, lambda *a: None)
    assert kind == "head" and source.startswith("eagle3 head") and backend.max_positions > 0
    assert [c.kind for c in choice.candidates] == ["head", "int4"]
    head = choice.candidates[0]
    assert head.accept_from.startswith("greedy speculative decoding (γ 4) of 3 requests")
    assert len(head.accept) >= 1 and all(0.0 <= a <= 1.0 for a in head.accept)
    assert "int4 self-draft left out (Cannot build an int4 self-draft" in choice.sentence()
    (tmp_path / "h" / "training.json").write_text(json.dumps({"accept_per_depth": [0.99, 0.99, 0.99]}))
    _, _, _, again = choose_for_family(spec, main, model, tokenizer, lambda *a: None)
    assert again.candidates[0].accept == head.accept  # the report's 99% is not what judges it
    with pytest.raises(DecodeError, match=r"No draft to choose the fastest of for this model \(int4 self-draft: "
                                          r"Cannot build an int4 self-draft.*\); draft with --helper"):
        choose_for_family(FamilySpec(name="t", main="tiny", draft=Fastest()), main, model, tokenizer,
                          lambda *a: None)


@pytest.mark.model
def test_on_the_bundled_model_int4_and_the_shipped_head_are_both_measured(smollm2):
    spec = FamilySpec(name="b", main="bundled", draft=Fastest())
    backend, source, kind, choice = choose_for_family(spec, smollm2.main, smollm2.main_model, smollm2.tokenizer,
                                                      lambda *a: None)
    by_kind = {c.kind: c for c in choice.candidates}
    assert set(by_kind) == {"int4", "head"}
    assert by_kind["int4"].accept[0] > 0.9  # the int4 copy agrees with the target almost always
    assert all(c.accept_from.startswith("greedy speculative decoding") for c in by_kind.values())
    assert by_kind["head"].accept[0] < by_kind["int4"].accept[0]
    assert kind == max(by_kind.values(), key=lambda c: c.predicted).kind
    assert all(0 < c.c < 2 for c in by_kind.values())
    assert by_kind["head"].c < by_kind["int4"].c  # one layer against thirty
