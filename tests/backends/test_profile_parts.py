"""scripts/profile_parts.py: the part-by-part timed forward is the backend's own forward (same
logits bit for bit, same cache), and its breakdown accounts for the whole wall time."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import profile_parts  # noqa: E402

from decoders.backends.llama_fast import LlamaBackend  # noqa: E402
from tests.support.tiny import tiny_model  # noqa: E402


@pytest.fixture(scope="module", params=["float32", "float16"])
def backend(request):
    if request.param == "float16":  # float16 weights through fbgemm: one layout, no packed copy
        from decoders.backends.fp16_cpu import Fp16LlamaBackend, fbgemm_reason

        if fbgemm_reason() is not None:
            pytest.skip(fbgemm_reason())
        fp16 = Fp16LlamaBackend.from_hf(tiny_model(layers=3))
        assert list(profile_parts.layouts(fp16)) == ["plain"]
        return fp16
    return LlamaBackend.from_hf(tiny_model(layers=3))


@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_timed_forward_gives_the_backends_logits_and_cache(backend, n):
    prompt = torch.arange(3, 20)
    ids = torch.arange(30, 30 + n) % 64
    profile_parts.prefill(backend, prompt)
    want = backend.forward(ids, n)
    want_kv = [kv[:, :, : len(prompt) + n].clone() for kv in backend.cache.layers]
    for layout, mm in profile_parts.layouts(backend).items():
        backend.crop(len(prompt))
        clock: dict[str, float] = {}
        got = profile_parts.timed_forward(backend, ids, mm, clock)
        if layout == profile_parts.chosen_layout(backend, n):
            assert torch.equal(got, want)
            assert all(torch.equal(kv[:, :, : len(prompt) + n], w) for kv, w in zip(backend.cache.layers, want_kv, strict=False))
        else:  # the other layout computes the same function up to float32 rounding
            assert torch.allclose(got, want, atol=1e-4)
        assert backend.cached_length == len(prompt) + n
        assert set(clock) == set(profile_parts.PARTS) | {"total"}
        assert sum(clock[p] for p in profile_parts.PARTS) == pytest.approx(clock["total"])
        assert all(clock[p] > 0 for p in ("qkv", "o", "gate_up", "down", "attn", "head"))


def test_check_and_breakdown_run_on_every_row_count(backend):
    prompt = torch.arange(3, 20)
    profile_parts.check_timed_forward(backend, prompt, (1, 2, 8))
    profile_parts.prefill(backend, prompt)
    parts = profile_parts.breakdown_ms(backend, prompt, 4, "plain", reps=1)
    assert parts["total"] > 0 and backend.cached_length == len(prompt)
    assert profile_parts.chosen_layout(backend, 1) == "plain"
    assert profile_parts.chosen_layout(backend, 2) == ("packed" if "packed" in profile_parts.layouts(backend) else "plain")


def test_floor_reads_the_weights_size():
    floor = profile_parts.Floor(8 << 20)
    assert floor.nbytes == 8 << 20 and floor.read_ms(repeats=2) > 0
