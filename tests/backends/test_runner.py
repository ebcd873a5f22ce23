"""The KV runner reuses what its cache holds and runs only the new positions."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from decoders.backends.hf import HFBackend
from decoders.backends.runner import KVRunner
from decoders.core.errors import DecodeError


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=50, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


def full_logits(model, seq):
    with torch.no_grad():
        return model(torch.tensor([seq])).logits[0].float()


def test_prefix_is_reused_and_only_new_positions_run(model):
    runner = KVRunner(HFBackend(model))
    runner.run([1, 2, 3, 4, 5])
    runner.run([1, 2, 3, 4, 5, 6])  # one new token
    runner.run([1, 2, 3, 9, 10], keep=2)  # diverges at index 3: crop to 3, run 2
    runner.run([1, 2, 3, 9, 10], keep=1)  # fully cached: the kept position is recomputed
    assert [f.positions for f in runner.log] == [5, 1, 2, 1]
    assert runner.n_forward == 4 and runner.n_positions == 9


def test_logits_after_crop_match_a_full_forward(model):
    runner = KVRunner(HFBackend(model))
    runner.run([3, 1, 4, 1, 5, 9, 2, 6])
    got = runner.run([3, 1, 4, 1, 7, 7, 7], keep=3)
    want = full_logits(model, [3, 1, 4, 1, 7, 7, 7])[-3:]
    assert torch.allclose(got, want, atol=1e-4)


def test_device_tail_is_reused_once_named(model):
    runner = KVRunner(HFBackend(model))
    runner.run([1, 2, 3], tail=torch.tensor([4, 5]), keep=3)
    runner.name_tail([4, 5])
    runner.run([1, 2, 3, 4, 5, 6])
    assert [f.positions for f in runner.log] == [5, 1]


def test_context_overflow_is_a_clear_error(model):
    runner = KVRunner(HFBackend(model))
    with pytest.raises(DecodeError, match="beyond the model's context of 64"):
        runner.run(list(range(1, 50)) + list(range(1, 20)))


def test_early_exit_view_shares_weights(model):
    backend = HFBackend(model)
    draft = backend.early_exit(1)
    assert draft.n_layers == 1 and backend.n_layers == 2
    assert draft.model.lm_head.weight.data_ptr() == model.lm_head.weight.data_ptr()
    assert len(model.model.layers) == 2  # the full model is untouched
    out = KVRunner(draft).run([1, 2, 3])
    assert out.shape == (1, 50)


def test_warm_up_leaves_an_empty_cache_and_the_same_logits(model):
    from decoders.models.backend_choice import warm_up

    cold = KVRunner(HFBackend(model)).run([5, 6, 7])
    backend = HFBackend(model)
    warm_up(backend)
    assert backend.cached_length == 0
    assert torch.equal(KVRunner(backend).run([5, 6, 7]), cold)


def test_tree_forward_is_logged_and_its_nodes_held_unnamed(model):
    from decoders.backends.tree import TokenTree

    tree = TokenTree.from_paths([[7, 8], [9]])
    runner = KVRunner(HFBackend(model))
    runner.run([1, 2, 3, 4, 5])
    logits = runner.run_tree([1, 2, 3, 4, 5, 6], tree)  # the new prefix token and three nodes
    assert logits.shape == (4, 50)
    assert runner.held == [1, 2, 3, 4, 5, 6, None, None, None]
    runner.run_tree([1, 2, 3, 4, 5, 6], tree)  # the last prefix token always reruns
    assert runner.held == [1, 2, 3, 4, 5, 6, None, None, None]
    runner.keep_path(tree.path(1))
    assert runner.held == [1, 2, 3, 4, 5, 6, 7, 8] and runner.backend.cached_length == 8
    got = runner.run([1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert [f.positions for f in runner.log] == [5, 4, 4, 1]
    assert torch.allclose(got, full_logits(model, [1, 2, 3, 4, 5, 6, 7, 8, 9])[-1:], atol=1e-4)
