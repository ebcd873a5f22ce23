"""`--dtype float16` on CPU: a float32 model whose matrices run as float16 weights through fbgemm
(`decoders.backends.fp16_cpu`). Its logits are float32 math on the float16-rounded matrices; every method's
greedy output is float16 autoregressive decoding's; what cannot run says so in one line."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from decoders.backends import fp16_cpu  # noqa: E402
from decoders.backends.fp16_cpu import Fp16LlamaBackend  # noqa: E402
from decoders.backends.llama_fast import LlamaBackend  # noqa: E402
from decoders.backends.llama_weights import prepare  # noqa: E402
from decoders.backends.quantized import QuantizedLlamaBackend  # noqa: E402
from decoders.core.errors import DecodeError  # noqa: E402
from decoders.core.params import DecodeParams  # noqa: E402
from decoders.engine import Engine  # noqa: E402
from decoders.models.backend_choice import make_backend  # noqa: E402
from decoders.models.drafts import EarlyExit, HelperModel, Int4  # noqa: E402
from decoders.models.family import FamilySpec, load_family  # noqa: E402
from tests.support.llama import KINDS, _ids, _model  # noqa: E402
from tests.support.quantized import PROMPT, peaked_model  # noqa: E402
from tests.support.tiny import save_tiny_model, tiny_llama_config  # noqa: E402

pytestmark = pytest.mark.skipif(fp16_cpu.fbgemm_reason() is not None, reason="no fbgemm float16 kernels in this torch")

ATOL = 1e-5  # against float32 math on the same rounded matrices; observed <= 4e-7


def _rounded_reference(model) -> LlamaBackend:
    """The float32 backend on the same (fused, folded, RoPE-paired) matrices, each rounded to
    float16 and back: what the float16 backend must compute, in plain float32 addmm."""
    w = prepare(model)

    def r(t):
        return t.half().float()

    layers = tuple(dataclasses.replace(x, wqkv=r(x.wqkv), wo=r(x.wo), wgate_up=r(x.wgate_up), wdown=r(x.wdown))
                   for x in w.layers)
    return LlamaBackend(dataclasses.replace(w, layers=layers, head=r(w.head), packed={}), packed_multi_token=False)


def _diff(a, b) -> float:
    return (a - b).abs().max().item()


@pytest.mark.parametrize("kind", KINDS)
def test_logits_are_float32_math_on_float16_rounded_weights(kind):
    model = _model(kind)
    fp16, ref, fp32 = Fp16LlamaBackend.from_hf(model), _rounded_reference(model), LlamaBackend.from_hf(model)
    ids = _ids(24)
    prefill = fp16.forward(ids[:16], 16)
    assert _diff(prefill, ref.forward(ids[:16], 16)) < ATOL
    assert _diff(prefill, fp32.forward(ids[:16], 16)) > 10 * ATOL  # the weights really are float16
    for token in ids[16:20]:  # one-token steps
        assert _diff(fp16.forward(token[None], 1), ref.forward(token[None], 1)) < ATOL
    verify = fp16.forward(ids[20:], 4)  # a verify-sized forward
    assert _diff(verify, ref.forward(ids[20:], 4)) < ATOL
    assert fp16.cached_length == ref.cached_length == 24


def test_float16_weights_are_half_the_bytes_and_the_float32_copies_are_gone():
    model = _model("llama")
    fp16, fp32 = Fp16LlamaBackend.from_hf(model), LlamaBackend.from_hf(model)
    assert fp16.weight_bytes * 2 == fp32.weight_bytes  # folded norms: matrices and head only
    layer = fp16.weights.layers[0]
    assert all(t.device.type == "meta" for t in (layer.wqkv, layer.wo, layer.wgate_up, layer.wdown, fp16.weights.head))
    assert fp16.vocab_size == fp32.vocab_size and fp16.dtype == torch.float32
    assert fp16.cache.dtype == torch.float32
    # early exits share the packed weights and count only their layers
    exit_ = fp16.early_exit(1)
    assert isinstance(exit_, Fp16LlamaBackend) and exit_.draft_of is fp16 and exit_._matmuls is fp16._matmuls
    assert exit_.weight_bytes < fp16.weight_bytes


def test_one_token_steps_and_a_verify_agree_greedily():
    model = peaked_model(layers=3)
    backend = Fp16LlamaBackend.from_hf(model)
    prompt = torch.tensor([5, 9, 4, 7, 7, 2, 11, 6])
    backend.forward(prompt, 1)
    steps, logits = [], []
    token = torch.tensor([12])
    for _ in range(6):
        step = backend.forward(token, 1)
        logits.append(step[0])
        steps.append(int(step[0].argmax()))
        token = torch.tensor([steps[-1]])
    backend.crop(len(prompt))
    verify = backend.forward(torch.tensor([12] + steps[:-1]), 6)
    assert verify.argmax(-1).tolist() == steps
    assert _diff(verify, torch.stack(logits)) < 1e-4  # peaked logits (~5): float32 rounding by row count


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("fp16") / "main", model=peaked_model(layers=3))


@pytest.fixture(scope="module")
def fp16_family(tiny_folder):
    return load_family(FamilySpec(name="t", main=str(tiny_folder), draft=EarlyExit(layer=2), device="cpu", dtype="float16"))


def test_float16_on_cpu_loads_a_float32_model_with_float16_weights(fp16_family, tiny_folder):
    family = fp16_family
    assert isinstance(family.main, Fp16LlamaBackend) and isinstance(family.helper, Fp16LlamaBackend)
    assert next(family.main_model.parameters()).dtype == torch.float32
    assert family.dtype == torch.float16
    assert family.describe().dtype == "float16 weights, float32 activations"
    # float16 AR is greedy decoding on the rounded matrices in float32 math
    reference = _rounded_reference(family.main_model)
    ids = family.encode_prompt(PROMPT, chat_template=True)
    result = Engine(family).run(PROMPT, DecodeParams(method="ar", max_new_tokens=24))
    expected, step = [], torch.tensor(ids)
    for _ in range(len(result.method.ids)):
        expected.append(int(reference.forward(step, 1)[0].argmax()))
        step = torch.tensor(expected[-1:])
    assert result.method.ids == expected and len(expected) > 8


@pytest.mark.parametrize("params", [
    DecodeParams(method="spec", gamma=4, draft_policy="fixed", max_new_tokens=40),
    DecodeParams(method="spec", gamma=7, max_new_tokens=40),
    DecodeParams(method="pld", num_pred=5, draft_policy="fixed", max_new_tokens=40),
    DecodeParams(method="jacobi", block=4, max_new_tokens=40),
    DecodeParams(method="lookahead", max_new_tokens=40),
], ids=lambda p: f"{p.method}")
def test_every_method_emits_float16_autoregressive_output(fp16_family, params):
    result = Engine(fp16_family).run(PROMPT, params)
    assert result.method.ids == result.baseline.ids and result.summary.identical


def test_the_int4_self_draft_of_a_float16_target_shares_its_head_and_reads_its_cache(tiny_folder):
    family = load_family(FamilySpec(name="t", main=str(tiny_folder), draft=Int4(), device="cpu", dtype="float16"))
    draft = family.helper
    assert isinstance(draft, QuantizedLlamaBackend) and draft.draft_of is family.main
    assert draft._matmuls.head_matmul is family.main.shared_head and draft.own_bytes < draft.weight_bytes
    assert draft.adopt_reason(family.main) is None
    result = Engine(family).run(PROMPT, DecodeParams(method="spec", gamma=4, max_new_tokens=40))
    assert result.method.ids == result.baseline.ids and result.summary.drafted > 0
    # the int4 and bfloat16 heads are built from the float16 head read back
    for head in ("bfloat16", "int4"):
        other = QuantizedLlamaBackend.from_target(family.main, family.main_model, head=head)
        logits = other.forward(torch.tensor([5, 6, 7]), keep=1)
        assert logits.shape == (1, family.vocab_size) and torch.isfinite(logits).all()


def test_a_helper_model_gets_float16_weights_too(tiny_folder, tmp_path):
    from tests.support.tiny import perturbed_copy

    helper = save_tiny_model(tmp_path / "helper", model=perturbed_copy(peaked_model(layers=3), 0.05, seed=1))
    family = load_family(FamilySpec(name="t", main=str(tiny_folder), draft=HelperModel(source=str(helper)), device="cpu", dtype="float16"))
    assert isinstance(family.helper, Fp16LlamaBackend) and next(family.helper_model.parameters()).dtype == torch.float32
    result = Engine(family).run(PROMPT, DecodeParams(method="spec", gamma=4, max_new_tokens=40))
    assert result.method.ids == result.baseline.ids and result.summary.accepted > 0


def test_the_bench_reads_half_the_bytes_and_says_its_reference_is_float32(fp16_family, tmp_path):
    import json

    from decoders.bench import run_bench
    from decoders.bench.prompts import load_prompts

    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"question_id": 81, "category": "writing", "turns": ["w5 w6 w7 w8 w5 w6 w7"]}) + "\n")
    report = run_bench(fp16_family, load_prompts(path), ["pld"], max_new_tokens=8, limit=1, record_overhead_every=0,
                       bandwidth_bytes=1 << 22).to_json()
    assert report["family"]["dtype"] == "float16 weights, float32 activations"
    assert report["family"]["weight_bytes"] == fp16_family.main.weight_bytes
    assert fp16_family.main.weight_bytes * 2 == LlamaBackend.from_hf(fp16_family.main_model).weight_bytes
    assert any(note.startswith("float16 weights on CPU: transformers runs the float32 model") for note in report["notes"])


def test_the_cli_runs_float16_on_cpu(capsys, monkeypatch, tmp_path, tiny_folder):
    from tui_decode.cli.main import main

    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path))
    assert main(["run", "--main", str(tiny_folder), "--prompt", "w5 w6", "--max-new-tokens", "4",
                 "--self-draft-layer", "2", "--device", "cpu", "--dtype", "float16"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def _refused(spec_changes=None, fast=True, folder=None):
    spec = FamilySpec(name="t", main=str(folder), device="cpu", dtype="float16", **(spec_changes or {}))
    with pytest.raises(DecodeError) as err:
        load_family(spec, fast=fast)
    message = str(err.value)
    assert message.startswith("float16 on CPU needs ") and message.endswith("; use --dtype float32.")
    assert "\n" not in message
    return message


def test_the_transformers_backend_is_refused(tiny_folder):
    assert "the fast Llama backend" in _refused(fast=False, folder=tiny_folder)


def test_a_model_the_fast_backend_cannot_run_is_refused(tmp_path):
    from transformers import LlamaForCausalLM

    config = tiny_llama_config(vocab=64, layers=1)
    config.hidden_act = "gelu"
    folder = save_tiny_model(tmp_path / "gelu", model=LlamaForCausalLM(config).eval())
    message = _refused(folder=folder)
    assert "a Llama-shaped model for the fast backend, and this one is not (hidden_act 'gelu' is not silu)" in message
    with pytest.raises(DecodeError, match="hidden_act 'gelu'"):
        make_backend(LlamaForCausalLM(config).eval(), fp16_weights=True)


def test_a_torch_without_fbgemm_is_refused(monkeypatch, tiny_folder):
    from types import SimpleNamespace

    monkeypatch.setattr(torch.backends, "quantized", SimpleNamespace(supported_engines=["qnnpack", "onednn"]))
    assert "fbgemm's float16 kernels, and this torch build has no fbgemm quantized engine" in _refused(folder=tiny_folder)


def test_a_failing_fbgemm_kernel_is_refused(monkeypatch, tiny_folder):
    def broken(*args):
        raise RuntimeError("Could not run 'quantized::linear_dynamic_fp16' with arguments from the 'CPU' backend.\nmore")

    monkeypatch.setattr(fp16_cpu, "_probe", broken)
    message = _refused(folder=tiny_folder)
    assert "fbgemm's float16 linear kernel does not run here (Could not run 'quantized::linear_dynamic_fp16'" in message


def test_float16_elsewhere_stays_a_model_dtype(monkeypatch):
    from decoders.models.backend_choice import resolve_dtype

    assert resolve_dtype("float16", torch.device("cpu")) == torch.float16
    assert fp16_cpu.load_dtype_for(torch.device("cpu"), torch.float16, True, None) == torch.float32
    assert fp16_cpu.load_dtype_for(torch.device("cpu"), torch.bfloat16, True, None) == torch.bfloat16
    assert fp16_cpu.load_dtype_for(torch.device("cuda"), torch.float16, True, None) == torch.float16


# -- the bundled model ------------------------------------------------------------------------------

def test_bundled_float16_weights_read_half_and_every_method_gives_float16_ar(smollm2):
    from dataclasses import replace

    from decoders.models.backend_choice import quantized_draft

    fp16 = Fp16LlamaBackend.from_hf(smollm2.main_model)  # the fixture's float32 transformers module
    assert fp16.weight_bytes * 2 == smollm2.main.weight_bytes
    draft = quantized_draft(fp16, smollm2.main_model, "int4")
    assert draft.draft_of is fp16 and draft._matmuls.head_matmul is fp16.shared_head
    family = replace(smollm2, main=fp16, helper=draft, helper_source="int4 self-draft", draft=Int4(),
                     dtype=torch.float16)
    assert family.describe().dtype == "float16 weights, float32 activations"
    engine = Engine(family)
    drafted = accepted = 0
    for prompt in ("Explain why the sky is blue in two sentences.",):
        for params in (DecodeParams(method="spec", gamma=4, max_new_tokens=32),
                       DecodeParams(method="pld", max_new_tokens=32)):
            result = engine.run(prompt, params)
            assert result.method.ids == result.baseline.ids and result.summary.identical
            if params.method == "spec":
                drafted, accepted = drafted + result.summary.drafted, accepted + result.summary.accepted
    assert accepted / drafted >= 0.9  # the int4 draft agrees with float16 weights as with float32
