"""`LlamaBackend` against transformers: same logits, same greedy tokens, exact crop and early exit."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from decoders.backends import llama_fast, llama_weights  # noqa: E402
from decoders.backends.hf import HFBackend, truncated_model  # noqa: E402
from decoders.backends.llama_fast import LlamaBackend, supports, unsupported_reason  # noqa: E402
from tests.support.llama import KINDS, VOCAB, _close, _hf_logits, _ids, _model  # noqa: E402


@pytest.mark.parametrize("kind", KINDS)
def test_full_sequence_matches_hf(kind):
    model = _model(kind)
    backend = LlamaBackend.from_hf(model)
    ids = _ids(24)
    _close(backend.forward(ids, 24), _hf_logits(model, ids))
    assert backend.cached_length == 24


@pytest.mark.parametrize("kind", KINDS)
def test_incremental_decode_with_keep(kind):
    model = _model(kind)
    backend = LlamaBackend.from_hf(model)
    ids = _ids(20)
    ref = _hf_logits(model, ids)
    _close(backend.forward(ids[:9], 1), ref[8:9])
    _close(backend.forward(ids[9:14], 3), ref[11:14])  # a verify step: several new tokens
    for i in range(14, 20):  # one-token steps
        _close(backend.forward(ids[i : i + 1], 1), ref[i : i + 1])
    assert backend.cached_length == 20


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_crop_and_rerun_equals_fresh_forward(kind):
    model = _model(kind)
    backend = LlamaBackend.from_hf(model)
    backend.forward(_ids(15), 1)
    backend.crop(6)
    assert backend.cached_length == 6
    new = _ids(7, seed=2)
    fresh = torch.cat([_ids(15)[:6], new])
    _close(backend.forward(new, 7), _hf_logits(model, fresh)[6:])
    backend.crop(100)  # cropping beyond the end keeps everything
    assert backend.cached_length == 13
    backend.reset()
    assert backend.cached_length == 0
    _close(backend.forward(fresh, 2), _hf_logits(model, fresh)[-2:])


def test_attention_without_enable_gqa(monkeypatch):
    """torch < 2.5 has no SDPA ``enable_gqa``: multi-token forwards repeat k/v instead."""
    monkeypatch.setattr(llama_fast, "_SDPA_GQA", False)
    model = _model()
    ids = _ids(12)
    backend = LlamaBackend.from_hf(model)
    _close(backend.forward(ids[:8], 8), _hf_logits(model, ids)[:8])
    _close(backend.forward(ids[8:], 4), _hf_logits(model, ids)[8:])


def test_cache_grows_in_chunks(monkeypatch):
    monkeypatch.setattr(llama_fast, "CACHE_CHUNK", 4)
    model = _model()
    backend = LlamaBackend.from_hf(model)
    ids = _ids(30)
    ref = _hf_logits(model, ids)
    _close(backend.forward(ids[:3], 3), ref[:3])
    for i in range(3, 28, 5):  # every step crosses chunk boundaries
        _close(backend.forward(ids[i : i + 5], 2), ref[i + 3 : i + 5])
    assert backend._capacity >= 28


def test_positions_beyond_max_raise():
    backend = LlamaBackend.from_hf(_model(), max_positions=16)
    backend.forward(_ids(10), 1)
    with pytest.raises(ValueError, match="max_positions"):
        backend.forward(_ids(7), 1)
    assert backend.cached_length == 10


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_greedy_tokens_match_hf_generate(kind):
    model = _model(kind)
    prompt = _ids(5)
    with torch.inference_mode():
        ref = model.generate(
            prompt[None], max_new_tokens=20, min_new_tokens=20, do_sample=False, attention_mask=torch.ones(1, 5, dtype=torch.long)
        )[0, 5:].tolist()
    backend = LlamaBackend.from_hf(model)
    tokens, ids = [], prompt
    for _ in range(20):
        tokens.append(int(backend.forward(ids, 1)[0].argmax()))
        ids = torch.tensor([tokens[-1]])
    assert tokens == ref


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("layers", [0, 1, 2])
def test_early_exit_matches_truncated_hf_model(kind, layers):
    model = _model(kind)
    full = LlamaBackend.from_hf(model)
    early = full.early_exit(layers)
    ref = HFBackend(truncated_model(model, layers))
    ids = _ids(12)
    _close(early.forward(ids[:8], 8), ref.forward(ids[:8], 8))
    _close(early.forward(ids[8:], 2), ref.forward(ids[8:], 2))
    assert early.n_layers == layers and full.cached_length == 0  # a cache of its own


def test_early_exit_shares_weights():
    full = LlamaBackend.from_hf(_model("qwen2"))
    early = full.early_exit(2)
    assert early.weights is full.weights
    for name in ("embed", "head"):
        assert getattr(full.weights, name).data_ptr() == getattr(early.weights, name).data_ptr()
    for la, lb in zip(full._layers[:2], early._layers, strict=False):
        for name in ("wqkv", "bqkv", "wo", "wgate_up", "bgate_up", "wdown"):
            assert getattr(la, name).data_ptr() == getattr(lb, name).data_ptr()
    assert early.weight_bytes < full.weight_bytes
    full.forward(_ids(4), 1)
    early.forward(_ids(6), 1)
    assert (full.cached_length, early.cached_length) == (4, 6)
    assert early._kv[0].data_ptr() != full._kv[0].data_ptr()
    # the packed multi-token weights are built once and shared too
    assert llama_weights.packed_matmuls(full.weights) is llama_weights.packed_matmuls(early.weights)


def test_packed_and_plain_paths_agree():
    """Verify-sized forwards run on oneDNN-packed weights (CPU float32); both paths match HF."""
    model = _model()
    ids = _ids(20)
    ref = _hf_logits(model, ids)
    for packed in (True, False):
        backend = LlamaBackend.from_hf(model, packed_multi_token=packed)
        backend.forward(ids[:10], 1)
        _close(backend.forward(ids[10:15], 5), ref[10:15])
        _close(backend.forward(ids[15:], 5), ref[15:])
    if torch.backends.mkldnn.is_available():
        assert isinstance(llama_weights.packed_matmuls(backend.weights), llama_weights.PackedMatmuls)


def test_prefill_longer_than_packed_limit(monkeypatch):
    monkeypatch.setattr(llama_fast, "PACKED_MAX_TOKENS", 4)
    model = _model()
    backend = LlamaBackend.from_hf(model)
    ids = _ids(12)
    ref = _hf_logits(model, ids)
    _close(backend.forward(ids[:8], 8), ref[:8])  # plain path
    _close(backend.forward(ids[8:], 4), ref[8:])  # packed path


def test_embedding_is_shared_with_the_model():
    model = _model()
    backend = LlamaBackend.from_hf(model)
    assert backend.weights.embed.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_tied_embeddings():
    model = _model(tie_word_embeddings=True)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    ids = _ids(10)
    _close(LlamaBackend.from_hf(model).forward(ids, 10), _hf_logits(model, ids))


def test_llama3_rope():
    rope = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    model = _model(rope_parameters=rope)
    assert supports(model)
    ids = _ids(40)
    _close(LlamaBackend.from_hf(model).forward(ids, 40), _hf_logits(model, ids))


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_bfloat16_follows_hf(kind):
    """bf16 keeps transformers' norm order (no folding) and the real-valued RoPE."""
    model = _model(kind).to(torch.bfloat16)
    ids = _ids(16)
    backend = LlamaBackend.from_hf(model)
    assert backend.dtype == torch.bfloat16 and not backend.weights.folded
    out = backend.forward(ids[:10], 10)
    assert out.dtype == torch.float32
    ref = _hf_logits(model, ids)
    _close(out, ref[:10], atol=0.05)  # bf16 rounding differs with op order
    for i in range(10, 16):
        _close(backend.forward(ids[i : i + 1], 1), ref[i : i + 1], atol=0.05)


def test_float64_is_exact():
    """In float64 the prepared maths (folded norms, paired RoPE dims) matches transformers'
    closely; the remaining gap is transformers normalising in float32 even for float64."""
    model = _model("qwen2").double()
    ids = _ids(16)
    out = LlamaBackend.from_hf(model).forward(ids, 16)
    _close(out, _hf_logits(model, ids), atol=1e-6)  # transformers normalises in float32


def test_unsupported_models():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=VOCAB, n_positions=64))
    assert not supports(gpt2)
    with pytest.raises(TypeError, match="model_type"):
        LlamaBackend.from_hf(gpt2)
    assert not supports(object())
    assert "bias" in unsupported_reason(_model(mlp_bias=True))
    assert "bias" in unsupported_reason(_model(attention_bias=True))
    assert "rope" in unsupported_reason(_model(rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}))
    assert "hidden_act" in unsupported_reason(_model(hidden_act="gelu"))
    assert "sliding" in unsupported_reason(_model("mistral", sliding_window=64))
    assert "sliding" in unsupported_reason(_model("qwen2", use_sliding_window=True, sliding_window=64, max_window_layers=1))
    assert supports(_model("mistral")) and supports(_model("qwen2"))


def test_bad_arguments():
    backend = LlamaBackend.from_hf(_model())
    with pytest.raises(ValueError):
        backend.forward(_ids(3), 4)
    with pytest.raises(ValueError):
        backend.forward(_ids(3)[None], 1)
    with pytest.raises(ValueError):
        backend.early_exit(4)


def test_bundled_smollm2_matches_hf(smollm2):
    """The bundled model: logits of a full forward and greedy tokens agree with transformers."""
    model = smollm2.main_model
    backend = LlamaBackend.from_hf(model)
    prompt = torch.tensor(smollm2.encode_prompt("Name three primary colours.", chat_template=True))
    with torch.inference_mode():
        ref = model.generate(prompt[None], max_new_tokens=12, do_sample=False, attention_mask=torch.ones_like(prompt)[None])
    ref = ref[0, len(prompt) :].tolist()
    tokens, ids = [], prompt
    for _ in range(len(ref)):
        tokens.append(int(backend.forward(ids, 1)[0].argmax()))
        ids = torch.tensor([tokens[-1]])
    assert tokens == ref
    seq = torch.tensor(prompt.tolist() + ref)
    backend.reset()
    # measured 8e-5 with 2 threads, 1.1e-4 with 1 (transformers' own float32 error is ~7e-5)
    _close(backend.forward(seq, len(seq)), _hf_logits(model, seq), atol=2e-4)
    early = HFBackend(truncated_model(model, 10))
    _close(backend.early_exit(10).forward(seq, 8), early.forward(seq, 8), atol=2e-4)


def test_kv_cache_grows_crops_resets_and_compacts():
    from decoders.backends.kv_cache import KVCache

    inv_freq = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
    cache = KVCache(2, 1, 8, 20, torch.float32, torch.device("cpu"), inv_freq, chunk=4)
    cache.reserve(3)
    assert (cache.capacity, cache.length, len(cache.layers)) == (4, 0, 2)

    def fill(start, end):  # every entry of position p holds p, in both layers
        with torch.inference_mode():  # the cache holds inference tensors
            for kv in cache.layers:
                kv[:, :, start:end] = torch.arange(start, end, dtype=torch.float32)[:, None]
        cache.length = end

    fill(0, 3)
    cache.reserve(9)  # grows in whole chunks and keeps what it held
    assert cache.capacity == 12 and cache.length == 3
    assert all(torch.equal(kv[0, 0, :3, 0], torch.tensor([0.0, 1.0, 2.0])) for kv in cache.layers)
    angles = 11 * inv_freq  # the RoPE table covers the new capacity
    assert torch.allclose(cache.rope[11, 0], torch.complex(angles.cos(), angles.sin()))
    with pytest.raises(ValueError, match="max_positions"):
        cache.reserve(21)
    fill(3, 9)
    cache.compact(4, [1, 3, 4])  # keep positions 5, 7, 8 at 4, 5, 6
    assert cache.length == 7
    for kv in cache.layers:
        assert kv[:, :, :7, :].eq(torch.tensor([0, 1, 2, 3, 5, 7, 8.0])[:, None]).all()
    cache.compact(5, torch.tensor([1]))  # device tensors are taken as they are
    assert cache.length == 6 and cache.layers[1][1, 0, 5, 3] == 8
    cache.compact(2, [0, 1])  # a leading run needs no copy
    assert cache.length == 4 and cache.layers[0][0, 0, 3, 0] == 3
    for start, rows in ((5, [0]), (1, [1, 0]), (1, [3]), (1, [-1])):
        with pytest.raises(ValueError):
            cache.compact(start, rows)
    cache.crop(100)
    assert cache.length == 4
    cache.crop(1)
    assert cache.length == 1
    cache.reset()
    assert cache.length == 0 and cache.capacity == 12


def test_positions_beyond_the_cache_end_grow_the_rope_table(monkeypatch):
    monkeypatch.setattr(llama_fast, "CACHE_CHUNK", 4)
    model = _model()
    backend = LlamaBackend.from_hf(model)
    ids = _ids(6)
    position_ids = torch.tensor([0, 1, 2, 3, 40, 41])
    with torch.inference_mode():
        ref = model(ids[None], position_ids=position_ids[None]).logits[0].float()
    backend.forward(ids[:4], 1)
    _close(backend.forward(ids[4:], 2, positions=position_ids[4:]), ref[4:])
    assert backend.cached_length == 6 and backend._capacity >= 42


def test_bad_positions_and_masks():
    backend = LlamaBackend.from_hf(_model())
    backend.forward(_ids(4), 1)
    for options in ({"positions": torch.arange(2)}, {"mask": torch.ones(3, 3)},
                    {"mask": torch.ones(2, 3, dtype=torch.bool)}):
        with pytest.raises(ValueError):
            backend.forward(_ids(3), 1, **options)
    assert backend.cached_length == 4
