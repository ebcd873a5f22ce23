"""A self-draft reads the target's keys and values (`KVRunner.follow`): no draft prefill, no
catch-up forwards over verified tokens, and the output stays the target's."""

from __future__ import annotations

import pytest
import torch

from decoders.backends.kv_cache import KVCache
from decoders.backends.llama_fast import LlamaBackend
from decoders.backends.runner import KVRunner
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.models.drafts import Int4
from decoders.models.family import FamilySpec, load_family
from tests.support.quantized import PROMPT, peaked_model
from tests.support.tiny import save_tiny_model, tiny_model


@pytest.fixture(scope="module")
def target():
    return LlamaBackend.from_hf(tiny_model(layers=3))


def test_an_early_exit_takes_the_targets_keys_and_values_and_runs_only_the_new_token(target):
    seq = [5, 9, 4, 7, 7, 2, 11]
    T, D = KVRunner(target), KVRunner(target.early_exit(2))
    assert D.follow(T) is None
    T.run(seq)
    D.run(seq + [13])
    assert [f.positions for f in D.log] == [1]  # the prefix came from the target's cache
    for mine, theirs in zip(D.backend.cache.layers, T.backend.cache.layers, strict=False):
        assert torch.equal(mine[:, :, : len(seq)], theirs[:, :, : len(seq)])
    # its logits are the early exit's own over the adopted prefix (equal keys and values)
    alone = KVRunner(target.early_exit(2))
    assert torch.allclose(D.run(seq + [13]), alone.run(seq + [13]), atol=1e-5)


def test_only_the_positions_the_target_verified_since_are_copied(target):
    T, D = KVRunner(target), KVRunner(target.early_exit(1))
    D.follow(T)
    T.run([4, 5, 6, 7])
    D.run([4, 5, 6, 7, 8])
    T.run([4, 5, 6, 7, 8, 9, 10], keep=3)  # a verify: the draft's 8 and two more
    D.run([4, 5, 6, 7, 8, 9, 10, 12])  # accepted through 10, then the bonus token 12
    assert D.adopted == 7 and D.held == [4, 5, 6, 7, 8, 9, 10, 12]
    assert [f.positions for f in D.log] == [1, 1]
    T.run([4, 5, 6, 30])  # the target moved elsewhere: only the shared prefix is adopted
    D.run([4, 5, 6, 30, 31])
    assert D.held == [4, 5, 6, 30, 31] and D.log[-1].positions == 1


def test_the_copies_are_timed_apart_from_the_draft_forwards(target):
    # a clock that moves 1 s at each read and 100 s while the copy runs: the forward's own time
    # must not hold the copy (c_hat is one draft step; the catch-up is its own figure)
    now = [0.0]

    def clock():
        now[0] += 1.0
        return now[0]

    T, D = KVRunner(target, clock=clock), KVRunner(target.early_exit(1), clock=clock)
    adopt = D.backend.adopt_cache

    def slow_adopt(source, start, end):
        now[0] += 100.0
        adopt(source, start, end)

    D.backend.adopt_cache = slow_adopt
    D.follow(T)
    T.run([4, 5, 6, 7])
    D.run([4, 5, 6, 7, 8])
    assert [(f.positions, f.seconds) for f in D.catch_up] == [(4, 101.0)]
    assert [(f.positions, f.seconds) for f in D.log] == [(1, 1.0)]
    mark = D.mark()
    D.run([4, 5, 6, 7, 8, 9])  # nothing new from the target: no copy, nothing logged for one
    assert len(D.catch_up) == 1 and D.seconds_since(mark) == 1.0
    T.run([4, 5, 6, 7, 8, 9, 10], keep=3)
    mark = D.mark()
    D.run([4, 5, 6, 7, 8, 9, 10, 12])
    assert D.catch_up[-1].positions == 3 and D.seconds_since(mark) == 102.0  # the iteration's drafting: both
    assert D.mean_seconds(1) == 1.0
    D.reset()
    assert D.catch_up == [] and D.log == []


def test_a_helper_model_keeps_its_own_cache(target):
    T = KVRunner(target)
    other = KVRunner(LlamaBackend.from_hf(tiny_model(layers=3, seed=1)))  # same shapes, other weights
    assert other.follow(T) == "it is not a draft built from that model"
    assert other.source is None
    T.run([4, 5, 6])
    other.run([4, 5, 6, 7])
    assert [f.positions for f in other.log] == [4]


def test_a_cache_of_another_layout_is_refused():
    a = KVCache(2, 2, 8, 64, torch.float32, torch.device("cpu"), torch.ones(4))
    b = KVCache(2, 1, 8, 64, torch.float32, torch.device("cpu"), torch.ones(4))
    b.reserve(4)
    b.length = 4
    with pytest.raises(ValueError, match=r"the caches differ in layout: kv_heads differs \(2 here, 1 there\)"):
        a.copy_from(b, 0, 4)
    with pytest.raises(ValueError, match="cannot copy positions 0..4: this cache holds 0, the source 4"):
        a.copy_from(b, 0, 5)


@pytest.fixture(scope="module")
def tiny_int4(tmp_path_factory):
    folder = save_tiny_model(tmp_path_factory.mktemp("draft-cache") / "main", model=peaked_model())
    return load_family(FamilySpec(name="t", main=str(folder), draft=Int4(), device="cpu"))


@pytest.mark.parametrize("policy", ["fixed", "adaptive"])
def test_the_int4_draft_never_prefills_and_the_output_is_the_targets(tiny_int4, policy):
    engine = Engine(tiny_int4)
    result = engine.run(PROMPT, DecodeParams(method="spec", gamma=4, max_new_tokens=40, draft_policy=policy))
    assert result.method.ids == result.baseline.ids and result.summary.identical
    assert result.summary.drafted > 0
    # every helper forward is one draft token: the prompt and every verified token came from the target
    assert {f.positions for f in engine.helper.log} == {1}
    assert engine.helper.source is engine.main


def test_a_draft_tree_adopts_the_accepted_path(tiny_int4):
    engine = Engine(tiny_int4)
    result = engine.run(PROMPT, DecodeParams(method="spec", gamma=4, tree_width=2, tree_depth=2, max_new_tokens=30))
    assert result.method.ids == result.baseline.ids
    assert {f.positions for f in engine.helper.log} == {1}
