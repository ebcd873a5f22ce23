"""The llama.cpp backend against itself: a batch, a tree and a compacted cache give the logits a
plain one-token-at-a-time run gives (llama.cpp's quantized kernels on the bundled Q4_1 file, loaded
in well under a second; no tokenizer, no torch model). What it cannot do is said in one line."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("llama_cpp")

from decoders.backends.llamacpp import LlamaCppBackend
from decoders.backends.llamacpp_model import LlamaModel  # noqa: E402
from decoders.core.errors import DecodeError  # noqa: E402
from decoders.models.bundled import bundled_gguf_path  # noqa: E402

PREFIX = [1, 504, 3458, 282, 4106, 314, 30, 2, 3, 7, 9, 11]
# llama.cpp quantizes activations per row for its Q4_1 dot products: a row's logits do not depend
# on the batch, up to summation order (measured max |diff| ~1e-4 over 49,152 logits)
TOL = 2e-3


@pytest.fixture(scope="module")
def model():
    return LlamaModel(bundled_gguf_path())


@pytest.fixture
def backend(model):
    with torch.inference_mode():
        yield LlamaCppBackend(model, max_positions=512)


def one_by_one(backend, tokens):
    """Logits after each of ``tokens``, fed one forward each from an empty cache."""
    backend.reset()
    return torch.cat([backend.forward(torch.tensor([t]), 1) for t in tokens])


def test_it_describes_the_file_as_stored(model, backend):
    assert model.vocab_size == 49152 and model.n_layers == 30
    assert 90e6 < backend.weight_bytes < 110e6  # the Q4_1 file's 98 MB, not 538 MB of float32
    assert model.description == "Q4_1"
    assert backend.max_positions == 512 and backend.device.type == "cpu"


def test_a_batch_gives_the_logits_of_one_token_at_a_time(backend):
    expected = one_by_one(backend, PREFIX)
    backend.reset()
    got = backend.forward(torch.tensor(PREFIX), keep=len(PREFIX))
    assert got.shape == (len(PREFIX), 49152) and got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=TOL, rtol=0)
    assert backend.cached_length == len(PREFIX)


def test_crop_then_forward_is_a_fresh_run(backend):
    expected = one_by_one(backend, PREFIX)
    backend.reset()
    backend.forward(torch.tensor(PREFIX[:6] + [99, 98, 97]), keep=1)
    backend.crop(6)
    assert backend.cached_length == 6
    got = backend.forward(torch.tensor(PREFIX[6:]), keep=len(PREFIX) - 6)
    torch.testing.assert_close(got, expected[6:], atol=TOL, rtol=0)


def tree_inputs(length):
    """Nodes a (depth 0), b (depth 0), c (child of a), d (child of c), e (child of b)."""
    tokens = torch.tensor([40, 41, 42, 43, 44])
    depth = [0, 0, 1, 2, 1]
    parent = [-1, -1, 0, 2, 1]
    mask = torch.zeros(5, 5, dtype=torch.bool)
    for i in range(5):
        j = i
        while j >= 0:
            mask[i, j] = True
            j = parent[j]
    return tokens, torch.tensor([length + d for d in depth]), mask


PATHS = {0: [0], 1: [1], 2: [0, 2], 3: [0, 2, 3], 4: [1, 4]}


def test_every_tree_node_sees_only_its_ancestors(backend):
    backend.reset()
    backend.forward(torch.tensor(PREFIX), 1)
    tokens, positions, mask = tree_inputs(len(PREFIX))
    got = backend.forward(tokens, keep=5, positions=positions, mask=mask)
    for node, path in PATHS.items():
        linear = one_by_one(backend, PREFIX + [int(tokens[i]) for i in path])[-1]
        torch.testing.assert_close(got[node], linear, atol=TOL, rtol=0, msg=f"node {node}")


def test_compact_keeps_the_accepted_path_and_drops_the_rest(backend):
    path = [1, 4]
    tokens, positions, mask = tree_inputs(len(PREFIX))
    follow = [50, 51]
    expected = one_by_one(backend, PREFIX + [41, 44] + follow)[-2:]
    backend.reset()
    backend.forward(torch.tensor(PREFIX), 1)
    backend.forward(tokens, keep=5, positions=positions, mask=mask)
    backend.compact(len(PREFIX), path)
    assert backend.cached_length == len(PREFIX) + 2
    got = backend.forward(torch.tensor(follow), keep=2)
    torch.testing.assert_close(got, expected, atol=TOL, rtol=0)


def test_a_crop_into_a_tree_keeps_its_first_nodes_as_a_path(backend):
    tokens, positions, mask = tree_inputs(len(PREFIX))
    expected = one_by_one(backend, PREFIX + [40, 60])[-1]
    backend.reset()
    backend.forward(torch.tensor(PREFIX), 1)
    backend.forward(tokens, keep=1, positions=positions, mask=mask)
    backend.crop(len(PREFIX) + 1)  # node 0 only
    torch.testing.assert_close(backend.forward(torch.tensor([60]), 1)[0], expected, atol=TOL, rtol=0)


def test_a_forward_after_an_unresolved_tree_keeps_none_of_it(backend):
    tokens, positions, mask = tree_inputs(len(PREFIX))
    expected = one_by_one(backend, PREFIX + [60])[-1]
    backend.reset()
    backend.forward(torch.tensor(PREFIX), 1)
    backend.forward(tokens, keep=1, positions=positions, mask=mask)
    backend.crop(len(PREFIX))
    torch.testing.assert_close(backend.forward(torch.tensor([60]), 1)[0], expected, atol=TOL, rtol=0)


def test_a_twin_has_a_cache_of_its_own(backend):
    twin = backend.twin()
    assert twin.model is backend.model
    backend.reset()
    a = backend.forward(torch.tensor(PREFIX), 1)
    b = twin.forward(torch.tensor(PREFIX[:3]), 1)
    assert backend.cached_length == len(PREFIX) and twin.cached_length == 3
    torch.testing.assert_close(backend.forward(torch.tensor([5]), 1), one_by_one(twin, PREFIX + [5])[-1:],
                               atol=TOL, rtol=0)
    assert not torch.equal(a, b)


def test_what_llama_cpp_cannot_do_is_said(backend):
    backend.reset()
    backend.forward(torch.tensor(PREFIX), 1)
    not_a_tree = torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 1]], dtype=torch.bool)  # 2 sees 1 but not 0
    with pytest.raises(NotImplementedError, match="not a tree"):
        backend.forward(torch.tensor([1, 2, 3]), 1, positions=torch.tensor([12, 13, 14]), mask=not_a_tree)
    with pytest.raises(NotImplementedError, match="prefix of a plain cache"):
        backend.compact(2, [1, 3])
    with pytest.raises(DecodeError, match="needs the torch backend"):
        backend.early_exit(10)
    with pytest.raises(DecodeError, match="beyond the llama.cpp context of 512"):
        backend.forward(torch.zeros(600, dtype=torch.long), 1)


def test_a_file_llama_cpp_cannot_load_is_one_line(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 64)
    with pytest.raises(DecodeError, match="llama.cpp cannot load .*bad.gguf.*--backend torch"):
        LlamaModel(bad)


def test_parked_cells_are_decoded_away_with_the_logits_unchanged(backend, monkeypatch):
    import decoders.backends.llamacpp as module

    monkeypatch.setattr(module, "MAX_PARKED", 2)
    tokens, positions, mask = tree_inputs(len(PREFIX))
    expected = one_by_one(backend, PREFIX + [41, 44, 60])[-1]
    backend.reset()
    backend.forward(torch.tensor(PREFIX), 1)
    backend.forward(tokens, keep=1, positions=positions, mask=mask)
    backend.compact(len(PREFIX), [1, 4])  # nodes 0, 2 and 3 come before node 4: parked
    assert backend._parked == 3
    got = backend.forward(torch.tensor([60]), 1)[0]  # more than 2 parked: decoded again first
    assert backend._parked == 0 and backend.cached_length == len(PREFIX) + 3
    torch.testing.assert_close(got, expected, atol=TOL, rtol=0)


def test_a_context_shorter_than_the_sequence_count_builds_and_decodes():
    """llama.cpp asserts n_outputs_max >= n_seq_max when it makes a context: a context of 64
    positions with 256 sequences killed the process (GGML_ASSERT). Run in a process of its own, so
    that the assert, if it comes back, fails this test instead of ending the suite."""
    import subprocess
    import sys

    code = ("import torch\nfrom decoders.backends.llamacpp import LlamaCppBackend, LlamaModel\n"
            "from decoders.models.bundled import bundled_gguf_path\n"
            "b = LlamaCppBackend(LlamaModel(bundled_gguf_path()), max_positions=64)\n"
            "with torch.inference_mode():\n    out = b.forward(torch.tensor([1, 504, 3458]), 1)\n"
            "print(b.n_seq, tuple(out.shape))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == ["64", "(1,", "49152)"]
