"""Speculative decoding with a trained head drafting (EAGLE-1/2, EAGLE-3, Medusa): greedy output is
the target's own, token for token, on both backends, linear or with a tree; the head is fed by the
target's forwards (no forward of the target beyond the method's own)."""

from __future__ import annotations

import pytest
import torch

from decoders.backends.heads import head_draft
from decoders.backends.hf import HFBackend
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.models.backend_choice import make_backend
from decoders.models.drafts import TrainedHead
from decoders.models.family import Family
from tests.support.engine import PROMPT, VOCAB, peaked_model
from tests.support.heads import write_head
from tests.support.tiny import tiny_tokenizer


def head_family(tmp_path, fmt: str, fast: bool) -> Family:
    model = peaked_model(layers=5)
    write_head(tmp_path / fmt, fmt)
    main = make_backend(model, fast=True) if fast else HFBackend(model)
    return Family(label="tiny", main=main, helper=head_draft(tmp_path / fmt, main, model), tokenizer=tiny_tokenizer(VOCAB),
                  stop_ids=frozenset(), device=torch.device("cpu"), dtype=torch.float32, main_source="tiny",
                  helper_source=f"{fmt} head", context_length=128, vocab_size=VOCAB, main_model=model,
                  draft=TrainedHead())


@pytest.mark.parametrize("fast", [False, True], ids=["hf-backend", "fast-backend"])
@pytest.mark.parametrize("fmt", ["eagle1", "eagle3", "medusa"])
@pytest.mark.parametrize("extra", [{"draft_policy": "fixed"}, {"draft_policy": "adaptive"},
                                   {"tree_width": 2, "tree_depth": 2}], ids=["fixed", "adaptive", "tree"])
def test_greedy_output_is_the_targets_own(tmp_path, fmt, fast, extra):
    engine = Engine(head_family(tmp_path, fmt, fast), pairing="sequential")
    result = engine.run(PROMPT, DecodeParams(method="spec", gamma=3, max_new_tokens=24, **extra))
    assert result.summary.identical is True, result.summary.first_divergence
    assert len(result.method.ids) == 24
    drafted = sum(len(it.draft) for it in result.method.iters)
    assert drafted > 0  # the head did draft


def test_medusa_drafts_no_further_than_its_heads(tmp_path):
    engine = Engine(head_family(tmp_path, "medusa", True), pairing="sequential")
    result = engine.run(PROMPT, DecodeParams(method="spec", gamma=6, max_new_tokens=24, draft_policy="fixed"))
    assert result.summary.identical is True
    assert max(len(it.draft) for it in result.method.iters) == 3  # three heads


@pytest.mark.parametrize("fmt", ["eagle1", "eagle3"])
def test_every_node_of_the_dynamic_tree_is_what_a_chain_along_its_path_drafts(tmp_path, fmt):
    """EAGLE-2's expansion runs many nodes in one head forward under an ancestor mask: each node's
    draft probability must equal the one a linear draft along its own path gives."""
    from types import SimpleNamespace

    from decoders.backends.runner import KVRunner
    from decoders.methods.shared.head_tree import draft_tree

    family = head_family(tmp_path, fmt, fast=True)
    T, D = KVRunner(family.main), KVRunner(family.helper)
    D.follow(T)
    prompt = [5, 9, 13, 22, 7, 31, 40, 11]
    seq = prompt + [int(T.run(prompt)[0].argmax())]
    tokens, parents, chance, q = draft_tree(SimpleNamespace(seq=seq), D, depth=3, width=2)
    assert len(tokens) == 2 + 2 * 2 + 2 * 2  # 2 at depth 1; then the 2 likeliest expanded, 2 children each
    assert D.backend.cached_length == len(seq)  # the tree rows are dropped after drafting
    for node, token in enumerate(tokens):
        path, p = [], parents[node]
        while p >= 0:
            path.insert(0, tokens[p])
            p = parents[p]
        want = torch.softmax(D.run(seq + path)[0], -1)[token]
        assert q[node] == pytest.approx(float(want), rel=1e-4, abs=1e-6)
        expect_chance = float(want) * (chance[parents[node]] if parents[node] >= 0 else 1.0)
        assert chance[node] == pytest.approx(expect_chance, rel=1e-4, abs=1e-7)
