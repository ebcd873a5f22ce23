"""The CUDA and MPS paths, checked on CPU by emulating what those devices do differently:

- CUDA's memory-efficient SDPA kernel returns its output in a transposed (non-contiguous) layout;
- MPS has no float64, so a float64 cast raises;
- a CUDA host read (``.item()``, ``.tolist()``, ``int(t)``, ...) waits for the device: tensors
  derived from the model's logits are marked, and every read of one outside the iteration's one
  counted transfer (`decoders.backends.host.to_host`) is a stray sync;
- CUDA forwards are timed by events, whose times may be read only after the iteration's transfer.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from decoders.backends import host  # noqa: E402
from decoders.backends.llama_fast import LlamaBackend  # noqa: E402
from decoders.backends.runner import ForwardTimer, KVRunner, device_clock  # noqa: E402
from decoders.core.declarations import get_method  # noqa: E402
from decoders.core.params import DecodeParams  # noqa: E402
from decoders.engine import Engine  # noqa: E402
from decoders.methods.shared.common import DecodeContext  # noqa: E402
from decoders.models.drafts import EarlyExit, HelperModel  # noqa: E402
from tests.support.engine import PROMPT, tiny_family  # noqa: E402

# One case per method (and per mode/shape of a method that packs its transfer differently).
METHOD_CASES = [
    DecodeParams(method="ar"),
    DecodeParams(method="ar", mode="sampling", temperature=0.9, seed=3),
    DecodeParams(method="spec", gamma=3, draft_policy="fixed"),
    DecodeParams(method="spec", gamma=3, mode="sampling", temperature=0.9, seed=3, draft_policy="fixed"),
    DecodeParams(method="pld", num_pred=5),
    DecodeParams(method="pld", num_pred=5, branches=3),
    DecodeParams(method="jacobi", block=4),
    DecodeParams(method="lookahead"),
]
IDS = [f"{p.method}-{'greedy' if p.greedy else 'sampling'}" + (f"-B{p.branches}" if p.branches > 1 else "")
       for p in METHOD_CASES]


@pytest.fixture(scope="module")
def family():
    return tiny_family(fast=True)


def _run_method(family, params: DecodeParams, main=None, helper=None):
    """One method run from empty caches, driven as the engine drives it; (run, iterations)."""
    engine = Engine(family)
    ids = family.encode_prompt(PROMPT, True)
    params = params.replace(max_new_tokens=16).validated()
    method = get_method(params.method)
    main = main or engine.main
    helper = (helper or engine.helper) if method.needs_helper else None
    for runner in (main, helper):
        if runner is not None:
            runner.reset()  # the backends are shared between runners: start from an empty cache
    ctx = DecodeContext(family, ids, params, main, helper, main.clock)
    gen = method.run(ctx)
    iters = []
    while True:
        try:
            iters.append(next(gen))
        except StopIteration as stop:
            return stop.value, iters


# -- CUDA's transposed SDPA output ------------------------------------------------------------------

def _transposed_sdpa(real):
    """SDPA whose output has CUDA's memory-efficient layout: [B, H, L, D] viewed over [B, L, H, D]."""

    def sdpa(*args, **kwargs):
        out = real(*args, **kwargs)
        return out.transpose(1, 2).contiguous().transpose(1, 2)

    return sdpa


def test_one_token_steps_take_the_transposed_sdpa_layout(monkeypatch, family):
    model = family.main_model
    ids = torch.randint(0, 64, (12,), generator=torch.Generator().manual_seed(0))
    reference = LlamaBackend.from_hf(model)
    expected = [reference.forward(ids[:8], 1)] + [reference.forward(ids[i:i + 1], 1) for i in range(8, 12)]
    monkeypatch.setattr(F, "scaled_dot_product_attention", _transposed_sdpa(F.scaled_dot_product_attention))
    backend = LlamaBackend.from_hf(model)
    got = [backend.forward(ids[:8], 1)] + [backend.forward(ids[i:i + 1], 1) for i in range(8, 12)]
    for a, b in zip(got, expected, strict=False):
        assert torch.equal(a, b)


# -- the prefill runs without an explicit mask ---------------------------------------------------------

def test_prefill_passes_is_causal_and_no_mask(monkeypatch, family):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, is_causal=False, **kwargs):
        calls.append((q.shape[-2], attn_mask is not None, is_causal))
        return real(q, k, v, attn_mask=attn_mask, is_causal=is_causal, **kwargs)

    model = family.main_model
    ids = torch.randint(0, 64, (14,), generator=torch.Generator().manual_seed(1))
    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    backend = LlamaBackend.from_hf(model)
    prefill = backend.forward(ids[:10], 1)
    layers = backend.n_layers
    assert calls[:layers] == [(10, False, True)] * layers  # prefill: flash-attention eligible
    calls.clear()
    verify = backend.forward(ids[10:13], 3)  # after a cache: the offset causal pattern needs a mask
    assert calls == [(3, True, False)] * layers
    torch.testing.assert_close(prefill, _hf_tail(model, ids[:10], 1), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(verify, _hf_tail(model, ids[:13], 3), atol=1e-4, rtol=1e-5)


def _hf_tail(model, ids, keep):
    with torch.inference_mode():
        return model(ids[None]).logits[0, -keep:].float()


# -- MPS: no float64 ----------------------------------------------------------------------------------

def _no_float64(monkeypatch):
    """Make a float64 cast raise as it does on MPS."""
    real_to, real_double = torch.Tensor.to, torch.Tensor.double
    message = ("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
               "Please use float32 instead.")

    def to(self, *args, **kwargs):
        if torch.float64 in args or kwargs.get("dtype") is torch.float64:
            raise TypeError(message)
        return real_to(self, *args, **kwargs)

    def double(self, *args, **kwargs):
        raise TypeError(message)

    monkeypatch.setattr(torch.Tensor, "to", to)
    monkeypatch.setattr(torch.Tensor, "double", double)
    return real_double


@pytest.mark.parametrize("params", METHOD_CASES, ids=IDS)
def test_every_method_runs_without_float64(monkeypatch, family, params):
    expected, _ = _run_method(family, params)
    _no_float64(monkeypatch)
    with pytest.raises(TypeError, match="MPS"):  # the emulation bites
        torch.zeros(2).to(torch.float64)
    run, _ = _run_method(family, params)
    assert run.ids == expected.ids and len(run.ids) == 16


def test_the_pack_is_exact_for_token_ids_and_float32_values():
    ids = torch.tensor([0, 1, 151_935, host.EXACT_INT_LIMIT - 1])
    values = torch.tensor([0.123456789, 1e-30, 0.99999994], dtype=torch.float32)
    flat = host.to_host([ids, values])
    assert [int(x) for x in flat[:4]] == ids.tolist()
    assert flat[4:] == values.tolist()


# -- one host transfer per iteration -----------------------------------------------------------------

class Device(torch.Tensor):
    """A tensor that lives "on the device": reading it on the host is a sync, counted unless it is
    the iteration's one transfer. Ops on it give `Device` tensors, so everything derived from the
    logits is tracked."""

    stray: list[str] = []
    in_transfer = False
    READS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__int__, torch.Tensor.__float__,
             torch.Tensor.__bool__, torch.Tensor.__index__, torch.Tensor.cpu, torch.Tensor.numpy,
             torch.Tensor.__format__}

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in cls.READS and not cls.in_transfer:
            cls.stray.append(getattr(func, "__name__", str(func)))
        if func is torch.Tensor.__getitem__ and _zero_d_index(args[1]):  # may read the index on the host
            cls.stray.append("__getitem__ with a 0-d tensor")
        return super().__torch_function__(func, types, args, kwargs or {})


def _zero_d_index(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dim() == 0 and not i.is_floating_point() for i in items)


class OnDevice:
    """A backend whose logits are `Device` tensors; its own inputs arrive as plain tensors, as
    the CPU fast path reads a scalar norm that it never reads on CUDA (checked separately)."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def forward(self, ids, keep, **options):
        return self._backend.forward(ids.as_subclass(torch.Tensor), keep, **options).as_subclass(Device)


@pytest.fixture
def counted(monkeypatch):
    real = host.to_host
    Device.stray = []

    def to_host(parts):
        Device.in_transfer = True
        try:
            return real(parts)
        finally:
            Device.in_transfer = False

    monkeypatch.setattr(host, "to_host", to_host)
    return host.TRANSFERS


@pytest.mark.parametrize("params", METHOD_CASES, ids=IDS)
def test_one_host_transfer_per_iteration(family, counted, monkeypatch, params):
    def no_multinomial(*args, **kwargs):
        raise AssertionError("torch.multinomial syncs the host on CUDA")

    monkeypatch.setattr(torch, "multinomial", no_multinomial)
    main = KVRunner(OnDevice(family.main))
    helper = KVRunner(OnDevice(family.helper))
    counted.reset()
    run, iters = _run_method(family, params, main, helper)
    assert len(run.ids) == 16
    assert Device.stray == []
    assert counted.count == len(iters) == len(run.iters)


def test_the_fast_backend_reads_nothing_on_the_host_off_cpu(family, counted, monkeypatch):
    """Without the CPU-only scalar norm, a forward fed device ids reads none of them back; tree
    positions and masks are read on the host before they move to the device."""
    from decoders.backends import llama_fast

    monkeypatch.setattr(llama_fast, "move", lambda tensor, device: tensor.as_subclass(Device))
    backend = LlamaBackend.from_hf(family.main_model)
    backend._scalar_norm = False  # what a CUDA backend does
    ids = torch.arange(4, 14).as_subclass(Device)
    backend.forward(ids[:6], 1)
    backend.forward(ids[6:9], 3)
    backend.forward(ids[9:10], 1)
    backend.forward(ids[:3], 3, positions=torch.tensor([10, 11, 11]),
                    mask=torch.tensor([[1, 0, 0], [1, 1, 0], [1, 0, 1]], dtype=torch.bool))
    assert Device.stray == []


# -- CUDA events: forward times read once the iteration's transfer is done -------------------------

class FakeEvent:
    """A CUDA event stand-in: records when it was recorded and when it was waited on."""

    trace: list = []

    def __init__(self):
        self.at = None

    def record(self):
        self.at = len(FakeEvent.trace)
        FakeEvent.trace.append(("record", self))

    def synchronize(self):
        FakeEvent.trace.append(("wait", self))

    def elapsed_time(self, end):
        return 1.5  # milliseconds


@pytest.mark.parametrize("params", [p for p in METHOD_CASES if p.method in ("ar", "spec", "pld", "jacobi")],
                         ids=[i for p, i in zip(METHOD_CASES, IDS, strict=False) if p.method in ("ar", "spec", "pld", "jacobi")])
def test_event_times_are_read_after_the_transfer(family, monkeypatch, params):
    FakeEvent.trace = []
    real = host.to_host

    def to_host(parts):
        FakeEvent.trace.append(("transfer", None))
        return real(parts)

    monkeypatch.setattr(host, "to_host", to_host)
    main, helper = KVRunner(family.main), KVRunner(family.helper)
    for runner in (main, helper):
        runner.timer = ForwardTimer(events=FakeEvent)
    run, _ = _run_method(family, params, main, helper)
    trace = FakeEvent.trace
    waits = [i for i, (kind, _) in enumerate(trace) if kind == "wait"]
    assert waits, "no forward time was read"
    for i in waits:
        recorded = trace[i][1].at
        assert any(kind == "transfer" for kind, _ in trace[recorded:i]), \
            "a forward's time was read before the iteration's host transfer (a sync mid-iteration)"
    assert all(it.t_verify_ms == 1.5 for it in run.iters)


def test_cuda_times_forwards_by_events_and_its_clock_does_not_sync(monkeypatch):
    import time

    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing: FakeEvent())
    timer = ForwardTimer.for_device(torch.device("cuda"))
    FakeEvent.trace = []
    log = timer.stop(timer.start(), 1, 1)
    assert [kind for kind, _ in FakeEvent.trace] == ["record", "record"]
    assert log.seconds == 0.0015 and [kind for kind, _ in FakeEvent.trace][-1] == "wait"
    assert device_clock(torch.device("cuda")) is time.perf_counter
    assert ForwardTimer.for_device(torch.device("cpu")).events is None


# -- transformers fallbacks: sliding windows, helpers with a shorter context ------------------------

def _sliding_mistral(seed: int, window: int = 8):
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(seed)
    config = MistralConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=64, max_position_embeddings=128, sliding_window=window,
                           initializer_range=0.4)
    return MistralForCausalLM(config).eval()


def test_sliding_window_models_decode_speculatively_on_the_transformers_backend():
    from decoders.backends.hf import HFBackend
    from decoders.models.backend_choice import make_backend
    from decoders.models.family import Family
    from tests.support.tiny import perturbed_copy, tiny_tokenizer

    main = _sliding_mistral(0)
    helper = perturbed_copy(main, 0.05, seed=1)
    backend = make_backend(main)
    assert isinstance(backend, HFBackend)  # the fast backend declines active sliding windows
    family = Family(label="sliding", main=backend, helper=make_backend(helper), tokenizer=tiny_tokenizer(64),
                    stop_ids=frozenset(), device=torch.device("cpu"), dtype=torch.float32, main_source="tiny",
                    helper_source="tiny+noise", context_length=128, vocab_size=64, main_model=main)
    engine = Engine(family)
    for params in (DecodeParams(method="spec", gamma=4), DecodeParams(method="pld", num_pred=6),
                   DecodeParams(method="jacobi", block=5)):
        result = engine.run(PROMPT, params.replace(max_new_tokens=30))
        assert result.method.ids == result.baseline.ids and len(result.method.ids) == 30
        assert result.summary.drafted > 0


def test_a_sliding_window_cache_cropped_past_its_record_starts_over():
    from decoders.backends.hf import HFBackend

    model = _sliding_mistral(2)
    runner, fresh = KVRunner(HFBackend(model)), KVRunner(HFBackend(model))
    seq = list(range(4, 24))
    runner.run(seq)
    for nxt in (seq[:15] + [5, 6], seq[:5] + [7, 8, 9], seq[:12] + [9] * 10):
        fresh.reset()
        torch.testing.assert_close(runner.run(nxt, keep=2), fresh.run(nxt, keep=2), atol=1e-5, rtol=1e-5)
        assert runner.backend.cached_length == len(runner.held) == len(nxt)


def test_a_helper_with_a_shorter_context_bounds_the_family_up_front(tmp_path):
    from decoders.core.errors import DecodeError
    from decoders.models.family import FamilySpec, load_family
    from tests.support.tiny import save_tiny_model, tiny_model

    main = save_tiny_model(tmp_path / "main", model=tiny_model(max_positions=128))
    helper = save_tiny_model(tmp_path / "helper", model=tiny_model(seed=1, max_positions=24))
    family = load_family(FamilySpec(name="t", main=str(main), draft=HelperModel(source=str(helper)), device="cpu"))
    assert family.context_length == 24
    engine = Engine(family)
    with pytest.raises(DecodeError, match="context of 24"):
        engine.check("w5 w6 w7 w8", DecodeParams(method="spec", max_new_tokens=30))
    result = engine.run("w5 w6 w7 w8", DecodeParams(method="spec", max_new_tokens=12))
    assert len(result.method.ids) == 12


# -- device flags: bad input is one line and exit 2 -------------------------------------------------

@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    from tests.support.tiny import save_tiny_model, tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", model=tiny_model(layers=3))


def _cli(capsys, argv, code, message):
    from tui_decode.cli.main import main

    assert main(argv) == code
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("flags,message", [
    (["--device", "cuda"], "Device cuda was requested but torch sees no CUDA GPU; use --device cpu or auto."),
    (["--device", "mps"], "Device mps was requested but torch sees no Apple MPS device"),
    (["--device", "cpu", "--dtype", "float16", "--device-map", "auto"],  # float16 weights run in the fast backend
     "float16 on CPU needs the whole model in the fast backend on the CPU, not spread by a device map; "
     "use --dtype float32."),
    (["--device-map", "everywhere"], "unknown device map 'everywhere'; choose one of auto, balanced, sequential"),
    (["--device-map", "auto", "--self-draft", "int4"],
     "An int4 self-draft needs the whole main model on one device, so it cannot be split by a device map"),
    (["--device-map", "auto", "--self-draft", "fastest"],  # the bundled family's default: it was 'An fastest self-draft'
     "The family's draft (the faster of its int4 self-draft and trained head, chosen at load) needs the whole main "
     "model on one device"),
])
def test_device_flags_refuse_what_cannot_run(capsys, monkeypatch, tmp_path, tiny_folder, flags, message):
    if "cuda" in flags and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path))
    _cli(capsys, ["run", "--main", str(tiny_folder), "--prompt", "w5 w6", "--max-new-tokens", "4", *flags], 2,
         message)


def test_a_device_map_without_accelerate_says_how_to_install_it(capsys, monkeypatch, tmp_path, tiny_folder):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name, *a))
    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path))
    _cli(capsys, ["run", "--main", str(tiny_folder), "--prompt", "w5", "--device-map", "auto"], 2,
         "a device map needs the accelerate package, which is not installed; install it with `pip install accelerate`")


@pytest.mark.parametrize("content,message", [
    ("{not json", "is not valid JSON"),
    ("[]", "a device map must be a non-empty JSON object"),
    ('{"model.layers.0": [1, 2]}', "the device map puts 'model.layers.0' on [1, 2]"),
    ('{"model.layers.0": "gpu"}', "the device map puts 'model.layers.0' on 'gpu'"),
    ('{"model.nothing": "cpu", "model.layers": "cpu"}', "The device map names 'model.nothing', which the model in"),
    ('{"": "cuda:9"}', "Cannot spread the model in"),
])
def test_a_bad_device_map_file_is_one_line(capsys, monkeypatch, tmp_path, tiny_folder, content, message):
    path = tmp_path / "map.json"
    path.write_text(content)
    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path))
    _cli(capsys, ["run", "--main", str(tiny_folder), "--prompt", "w5", "--device-map", str(path)], 2, message)


# -- device maps: a model spread over the CPU and disk ---------------------------------------------

DISK_MAP = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk", "model.layers.2": "cpu",
            "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}


def test_a_model_spread_over_cpu_and_disk_decodes_on_the_transformers_backend(tiny_folder):
    from decoders.backends.hf import HFBackend
    from decoders.backends.llama_fast import unsupported_reason
    from decoders.core.errors import DecodeError
    from decoders.models.family import FamilySpec, load_family

    messages = []
    plain = load_family(FamilySpec(name="t", main=str(tiny_folder), device="cpu"))
    spread = load_family(FamilySpec(name="t", main=str(tiny_folder), draft=HelperModel(source=str(tiny_folder)), device="cpu",
                                    device_map=DISK_MAP), progress=lambda m, f: messages.append(m))
    assert isinstance(spread.main, HFBackend) and isinstance(spread.helper, HFBackend)
    with pytest.raises(DecodeError, match="An early-exit draft cannot run on a model spread by a device map"):
        spread.main.early_exit(1)
    with pytest.raises(DecodeError, match="An early-exit self-draft cannot run on a model spread by a device map"):
        load_family(FamilySpec(name="t", main=str(tiny_folder), device="cpu", device_map=DISK_MAP, draft=EarlyExit(layer=1)))
    reason = unsupported_reason(spread.main_model)
    assert reason == "a device map spreads the model over cpu, disk; the fast backend runs a model on one device only"
    assert any("transformers backend: the fast backend cannot (a device map spreads" in m for m in messages)
    assert spread.describe().device_map == "custom: cpu, disk"
    expected = Engine(plain).run("w5 w6 w7 w5 w6", DecodeParams(method="ar", max_new_tokens=10)).method.ids
    engine = Engine(spread)
    for params in (DecodeParams(method="ar"), DecodeParams(method="spec", gamma=3), DecodeParams(method="pld")):
        run = engine.run("w5 w6 w7 w5 w6", params.replace(max_new_tokens=10)).method
        assert run.ids == expected


def test_device_map_auto_on_a_cpu_machine_loads_and_runs(tiny_folder):
    from decoders.models.family import FamilySpec, load_family

    family = load_family(FamilySpec(name="t", main=str(tiny_folder), device="cpu", device_map="auto"))
    assert family.describe().device_map.startswith("auto")
    assert len(Engine(family).run("w5 w6", DecodeParams(method="jacobi", max_new_tokens=6)).method.ids) == 6


# -- the static one-token step (what a CUDA graph replays), run eagerly on CPU -----------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_static_step_computes_what_the_regular_step_does(monkeypatch, family, dtype):
    from decoders.backends import llama_fast

    monkeypatch.setattr(llama_fast, "CACHE_CHUNK", 8)  # the cache grows (and the step re-prepares) often
    model = family.main_model.to(dtype)
    try:
        regular = LlamaBackend.from_hf(model)
        static = LlamaBackend.from_hf(model, step_mode="eager")
    finally:
        family.main_model.to(torch.float32)
    ids = torch.randint(0, 64, (40,), generator=torch.Generator().manual_seed(5))
    # bfloat16: attention over the whole (masked) capacity rounds differently from a slice
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=0.1, rtol=0.05)
    for backend in (regular, static):
        backend.forward(ids[:5], 1)
    for i in range(5, 30):
        if i == 20:  # a rejected draft: three tokens in, then back
            for backend in (regular, static):
                backend.forward(ids[30:33], 3)
                backend.crop(20)
        torch.testing.assert_close(static.forward(ids[i:i + 1], 1), regular.forward(ids[i:i + 1], 1), **tol)
    assert static.step._capacity == static.cache.capacity >= 30
    draft = static.early_exit(1)
    assert draft.step is not None and draft.step.mode == "eager"


def test_cuda_graphs_are_for_cuda_only(tiny_folder):
    from decoders.backends.static_step import mode_for
    from decoders.core.errors import DecodeError
    from decoders.models.backend_choice import make_backend
    from decoders.models.family import FamilySpec, load_family

    assert mode_for("auto", torch.device("cuda")) == "graph" and mode_for("auto", torch.device("cpu")) == "off"
    assert mode_for("off", torch.device("cuda")) == "off" and mode_for("on", torch.device("mps")) == "off"
    assert make_backend(tiny_model_for_graphs()).step is None  # CPU: the regular step
    with pytest.raises(DecodeError, match="CUDA graphs need a CUDA device, and this family runs on cpu"):
        load_family(FamilySpec(name="t", main=str(tiny_folder), device="cpu", cuda_graph="on"))


def tiny_model_for_graphs():
    from tests.support.tiny import tiny_model

    return tiny_model()


def test_a_failed_graph_capture_falls_back_to_the_regular_step(family):
    """On this CPU-only torch the capture itself fails, as a broken capture would on a GPU."""
    regular = LlamaBackend.from_hf(family.main_model)
    graphed = LlamaBackend.from_hf(family.main_model, step_mode="graph")
    ids = torch.arange(4, 12)
    for backend in (regular, graphed):
        backend.forward(ids[:5], 1)
    with pytest.warns(RuntimeWarning, match="CUDA graph capture failed"):
        first = graphed.forward(ids[5:6], 1)
    assert graphed.step is None  # off for good: later steps go the regular way without warning
    torch.testing.assert_close(first, regular.forward(ids[5:6], 1))
    torch.testing.assert_close(graphed.forward(ids[6:7], 1), regular.forward(ids[6:7], 1))


def test_auto_dtype_is_bfloat16_on_cuda_and_float16_without_bf16(monkeypatch):
    from decoders.models.backend_choice import resolve_dtype

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_dtype("auto", torch.device("cuda")) == torch.float16
    assert resolve_dtype("auto", torch.device("mps")) == torch.float32 == resolve_dtype("auto", torch.device("cpu"))
    assert resolve_dtype("float16", torch.device("cuda")) == torch.float16
