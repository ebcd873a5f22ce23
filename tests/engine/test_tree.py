"""Tree verification: one forward over a token tree gives each node the logits of its own chain,
and keeping one path leaves the cache as if that path had been run as a chain."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from decoders.backends.hf import HFBackend  # noqa: E402
from decoders.backends.llama_fast import LlamaBackend  # noqa: E402
from decoders.backends.runner import KVRunner  # noqa: E402
from decoders.backends.tree import TokenTree  # noqa: E402
from tests.support.tiny import tiny_model  # noqa: E402

ATOL = 1e-4  # float32: a tree forward and chains of other lengths round differently (~1e-6 here)
VOCAB = 64
PREFIX = [5, 17, 9, 33, 2, 41, 12, 8, 60, 27]
# branching at the root (5 | 11), after one token (6 | 10), after two (7 | 8), after three (9 | 15);
# token 7 recurs under different parents
PATHS = [[5, 6, 7], [5, 6, 8, 9], [5, 6, 8, 15], [5, 10], [11, 12, 7], [11, 14]]


@pytest.fixture(scope="module")
def model():
    model = tiny_model(vocab=VOCAB, layers=2, seed=3)
    with torch.no_grad():  # norm weights away from one, so the fast backend's folding matters
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
    return model


BACKENDS = {"hf": HFBackend, "fast": LlamaBackend.from_hf}


def _runner(model, kind: str) -> KVRunner:
    return KVRunner(BACKENDS[kind](model))


def _chain(model, kind: str, seq: list[int], keep: int = 1) -> torch.Tensor:
    """Logits of ``seq`` run as a plain chain on a fresh backend of the same kind."""
    return _runner(model, kind).run(seq, keep=keep)


def _close(a, b, atol=ATOL):
    diff = (a - b).abs().max().item()
    assert diff < atol, f"max |diff| {diff:.2e}"


def test_token_tree_structure():
    tree = TokenTree.from_paths(PATHS)
    assert tree.tokens == (5, 6, 7, 8, 9, 15, 10, 11, 12, 7, 14)
    assert tree.parents == (-1, 0, 1, 1, 3, 3, 0, -1, 7, 8, 7)
    assert tree.depth == (0, 1, 2, 2, 3, 3, 1, 0, 1, 2, 1)
    assert tree.path(5) == [0, 1, 3, 5] and tree.path(7) == [7]
    assert tree.children(-1) == [0, 7] and tree.children(1) == [2, 3]
    assert tree.is_path([0, 1, 3]) and not tree.is_path([1, 3]) and not tree.is_path([0, 3])
    mask = tree.ancestor_mask()
    assert mask.dtype == torch.bool and mask.shape == (11, 11)
    for i in range(len(tree)):
        assert set(mask[i].nonzero().flatten().tolist()) == set(tree.path(i))
    with pytest.raises(ValueError):
        TokenTree((1, 2), (-1, 1))  # a node cannot be its own parent
    with pytest.raises(ValueError):
        TokenTree((1, 2), (-1,))


@pytest.mark.parametrize("kind", ["hf", "fast"])
@pytest.mark.parametrize("cached", [0, 6, 13])
def test_each_node_gets_the_logits_of_its_chain(model, kind, cached):
    """Row 1 + i of a tree forward equals the last logits of prefix + path(i) run as a chain;
    ``cached`` positions are already held (13: more than the prefix, so it crops)."""
    tree = TokenTree.from_paths(PATHS)
    runner = _runner(model, kind)
    if cached:
        runner.run((PREFIX + [1, 2, 3])[:cached])
    logits = runner.run_tree(PREFIX, tree)
    assert logits.shape == (1 + len(tree), VOCAB)
    assert runner.log[-1].positions == len(PREFIX) - min(cached, len(PREFIX) - 1) + len(tree)
    assert runner.held == PREFIX + [None] * len(tree)
    _close(logits[0], _chain(model, kind, PREFIX)[0])
    for i in range(len(tree)):
        path_tokens = [tree.tokens[j] for j in tree.path(i)]
        _close(logits[1 + i], _chain(model, kind, PREFIX + path_tokens)[0])


@pytest.mark.parametrize("kind", ["hf", "fast"])
@pytest.mark.parametrize("node", [None, 2, 5, 6, 9, 10])
def test_keep_path_continues_like_a_fresh_run(model, kind, node):
    """After keep_path the next forward reuses prefix + path and matches a fresh run of it
    (node 2 is a prefix of the node order, the others need real compaction; None keeps none)."""
    tree = TokenTree.from_paths(PATHS)
    runner = _runner(model, kind)
    runner.run_tree(PREFIX, tree)
    nodes = [] if node is None else tree.path(node)
    runner.keep_path(nodes)
    kept = PREFIX + [tree.tokens[j] for j in nodes]
    assert runner.held == kept and runner.backend.cached_length == len(kept)
    seq = kept + [3, 44, 19]
    got = runner.run(seq, keep=3)
    assert runner.log[-1].positions == 3  # only the new tokens ran
    _close(got, _chain(model, kind, seq, keep=len(seq))[-3:])


@pytest.mark.parametrize("kind", ["hf", "fast"])
@pytest.mark.parametrize("n", [1, 5])
def test_explicit_default_positions_and_mask_change_nothing(model, kind, n):
    ids = torch.tensor(PREFIX)
    new = torch.tensor([3, 44, 19, 7, 8][:n])
    default_positions = torch.arange(len(PREFIX), len(PREFIX) + n)
    causal = torch.ones(n, n, dtype=torch.bool).tril_()
    outs = []
    both = {"positions": default_positions, "mask": causal}
    for options in ({}, {"positions": default_positions}, {"mask": causal}, both):
        backend = BACKENDS[kind](model)
        backend.forward(ids, 1)
        outs.append(backend.forward(new, n, **options))
        assert backend.cached_length == len(PREFIX) + n
    for out in outs[1:]:
        assert torch.equal(out, outs[0]) if kind == "fast" else torch.allclose(out, outs[0], atol=1e-6, rtol=0)


def test_fast_and_hf_agree_on_positions_and_mask(model):
    """Arbitrary positions (gaps, repeats) and an arbitrary mask: both backends compute the same."""
    prefix, new = torch.tensor(PREFIX), torch.tensor([3, 44, 19, 7, 8, 21])
    positions = torch.tensor([10, 11, 11, 14, 12, 30])
    mask = torch.tensor([[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 0, 0],
                         [0, 1, 0, 1, 0, 0], [1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1]], dtype=torch.bool)
    outs = []
    for make in BACKENDS.values():
        backend = make(model)
        backend.forward(prefix, 1)
        outs.append(backend.forward(new, 6, positions=positions, mask=mask))
    _close(outs[0], outs[1], atol=1e-5)


def test_hf_backend_refuses_what_it_cannot_mask():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    config = MistralConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64, sliding_window=4)
    backend = HFBackend(MistralForCausalLM(config).eval())
    backend.forward(torch.tensor(PREFIX), 1)
    with pytest.raises(NotImplementedError, match="'mistral'"):
        backend.forward(torch.tensor([1, 2]), 2, mask=torch.ones(2, 2, dtype=torch.bool).tril_())
    with pytest.raises(NotImplementedError, match="'mistral'.*DynamicSlidingWindowLayer"):
        backend.compact(5, [0, 2])


@pytest.mark.parametrize("kind", ["hf", "fast"])
def test_runner_tree_errors(model, kind):
    runner = _runner(model, kind)
    tree = TokenTree.from_paths(PATHS)
    with pytest.raises(ValueError, match="run_tree"):
        runner.keep_path([0])
    runner.run_tree(PREFIX, tree)
    with pytest.raises(ValueError, match="not a root-to-node path"):
        runner.keep_path([0, 2])
    runner.run(PREFIX + [1])  # a plain run drops the tree's slots and its claim to them
    assert runner.held == PREFIX + [1]
    with pytest.raises(ValueError, match="run_tree"):
        runner.keep_path([0])
