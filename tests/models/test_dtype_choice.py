"""dtype "fastest" (the bundled family's default): on CPU float32 or float16 weights, whichever
decodes faster here, chosen jointly with the draft; what was measured is kept and said."""

from __future__ import annotations

import pytest
import torch

import decoders.models.dtype_choice as dtype_choice
from decoders.backends.fp16_cpu import Fp16LlamaBackend, fbgemm_reason
from decoders.models.draft_choice import Candidate, DraftChoice
from decoders.models.dtype_choice import DtypeChoice, choose_target
from decoders.models.family import FamilySpec, load_family
from tests.support.tiny import save_tiny_model

needs_fbgemm = pytest.mark.skipif(fbgemm_reason() is not None, reason="no fbgemm float16 kernels in this torch")


def _tokenizer(text):
    return {"input_ids": [5, 9, 13, 22, 7, 31]}


def _draft(step_ms: float, predicted: float):
    """What `choose_for_family` returns for a main: (draft, description, kind, its record)."""
    best = Candidate("int4", "int4 self-draft", c=0.5, accept=[0.99], gamma=3, predicted=predicted)
    return object(), "int4 self-draft", "int4", DraftChoice("int4", step_ms, [1.0] * 8, [best])


def test_with_drafts_the_fewest_predicted_ms_per_token_wins_not_the_fastest_step():
    # float16 steps faster, but its draft pays less: 60 / 1.2 = 50 ms a token against 70 / 1.75 = 40
    drafts = {"float32": _draft(70.0, 1.75), "float16": _draft(60.0, 1.2)}
    mains = {"float32": "main32", "float16": "main16"}
    chosen, main, picked, record = choose_target(mains, _tokenizer, lambda m: drafts["float32" if m == "main32"
                                                                                       else "float16"])
    assert (chosen, main, picked) == ("float32", "main32", drafts["float32"])
    assert mains == {}  # the loser is not kept
    by_dtype = {o.dtype: o for o in record.options}
    assert by_dtype["float32"].ms_per_token == 40.0 and by_dtype["float16"].ms_per_token == 50.0
    assert record.sentence() == ("float32, the faster here (float32: 70.0 ms steps, int4 self-draft 1.75x, 40.0 ms "
                                 "per token predicted; float16 weights: 60.0 ms steps, int4 self-draft 1.20x, 50.0 ms "
                                 "per token predicted)")
    drafts["float16"] = _draft(60.0, 1.6)  # 37.5 ms a token: now float16 weights win
    chosen, main, _, _ = choose_target({"float32": "main32", "float16": "main16"}, _tokenizer,
                                       lambda m: drafts["float32" if m == "main32" else "float16"])
    assert (chosen, main) == ("float16", "main16")


def test_without_drafts_the_faster_step_wins(monkeypatch):
    monkeypatch.setattr(dtype_choice, "step_ms", lambda backend, seq: {"a": 65.0, "b": 57.0}[backend])
    chosen, main, picked, record = choose_target({"float32": "a", "float16": "b"}, _tokenizer)
    assert (chosen, main, picked) == ("float16", "b", None)
    assert record.sentence() == "float16 weights, the faster here (float16 weights: 57.0 ms steps; float32: 65.0 ms steps)"


def test_where_float16_weights_cannot_run_it_is_float32_and_says_why(tmp_path):
    path = save_tiny_model(tmp_path / "m")
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="fastest"), fast=False)
    assert family.dtype == torch.float32
    assert family.describe().dtype_choice == "float32 (float16 weights cannot run here: the transformers backend " \
                                                "was asked for)"
    assert DtypeChoice("float32", left_out="x").sentence() == "float32 (float16 weights cannot run here: x)"


@needs_fbgemm
def test_a_family_measures_both_and_keeps_the_winner_only(tmp_path, monkeypatch):
    path = save_tiny_model(tmp_path / "m")
    # the timing decides: float16 weights made faster here, then slower
    monkeypatch.setattr(dtype_choice, "step_ms",
                        lambda backend, seq: 1.0 if isinstance(backend, Fp16LlamaBackend) else 2.0)
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="fastest"))
    assert isinstance(family.main, Fp16LlamaBackend) and family.dtype == torch.float16
    assert family.describe().dtype == "float16 weights, float32 activations"
    assert family.describe().dtype_choice.startswith("float16 weights, the faster here")
    monkeypatch.setattr(dtype_choice, "step_ms",
                        lambda backend, seq: 3.0 if isinstance(backend, Fp16LlamaBackend) else 2.0)
    # measured again (the first choice is kept, tests/models/test_kept_choice.py)
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="fastest", remeasure=True))
    assert not isinstance(family.main, Fp16LlamaBackend) and family.dtype == torch.float32
    assert family.describe().dtype == "float32"
    assert sorted(o["dtype"] for o in family.dtype_choice["options"]) == ["float16", "float32"]


def test_off_the_cpu_and_in_a_plain_family_nothing_is_measured(tmp_path):
    path = save_tiny_model(tmp_path / "m")
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu"))
    assert family.dtype_choice is None and "dtype_choice" not in family.describe().to_json()
    from decoders.models.backend_choice import resolve_dtype

    assert resolve_dtype("fastest", torch.device("cpu")) == torch.float32  # loaded so; float16 weights come after
    assert resolve_dtype("fastest", torch.device("meta")) == resolve_dtype("auto", torch.device("meta"))


@pytest.mark.model
@needs_fbgemm
def test_the_bundled_default_measures_both_targets_and_decodes_with_the_winner():
    from dataclasses import replace

    from decoders.core.params import DecodeParams
    from decoders.engine import Engine
    from decoders.models.families import BUILTIN_FAMILIES

    spec = BUILTIN_FAMILIES["smollm2-135m"]
    assert (spec.dtype, spec.self_draft) == ("fastest", "fastest")
    family = load_family(replace(spec, device="cpu"))
    record = family.dtype_choice
    options = {o["dtype"]: o for o in record["options"]}
    assert set(options) == {"float32", "float16"} and record["chosen"] in options
    assert all(o["step_ms"] > 0 and o["ms_per_token"] > 0 for o in options.values())
    best = min(options.values(), key=lambda o: o["ms_per_token"])
    assert record["chosen"] == best["dtype"]
    assert family.describe().dtype == ("float16 weights, float32 activations" if best["dtype"] == "float16"
                                          else "float32")
    assert family.draft_choice is not None and family.self_draft in ("int4", "head")
    result = Engine(family).run("Count to five.", DecodeParams(method="spec", gamma=3, max_new_tokens=12))
    assert result.summary.identical is True


# -- no memory for float16 weights (issue 40) -------------------------------------------------------
ALLOCATOR = ("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to "
             "allocate 1048576 bytes.")


@needs_fbgemm
@pytest.mark.parametrize("failure", [MemoryError(), RuntimeError(ALLOCATOR)])
def test_float16_weights_that_cannot_be_packed_are_skipped_with_a_note(tmp_path, monkeypatch, failure):
    """`ulimit -v 3000000; tui-decode run --method ar ...` ended in "internal error" (or a
    segmentation fault) while the float16 candidate was packed; it is float32 now, and said."""
    import decoders.backends.fp16_cpu as fp16_cpu

    def no_room(model, max_positions=None):
        raise failure

    room = fp16_cpu.backend_for
    monkeypatch.setattr(fp16_cpu, "backend_for", no_room)
    path = save_tiny_model(tmp_path / "m")
    weights = sum(p.numel() for p in load_family(FamilySpec(name="t", main=str(path), device="cpu",
                                                            dtype="float32")).main_model.parameters())
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="fastest"))
    assert family.dtype == torch.float32 and not isinstance(family.main, Fp16LlamaBackend)
    from decoders.models.load_choice import PACKING_BYTES
    from decoders.models.memory import format_bytes

    why = f"packing them ran out of memory (they need about {format_bytes(weights * PACKING_BYTES)})"
    assert family.describe().dtype_choice == f"float32 (float16 weights cannot run here: {why})"
    assert family.choice_note == f"float16 weights were not timed: {why}; float32 it is"
    # room again: nothing was kept, so the next start times both (only this patch undone: the
    # conftest's patch keeps the choices in the test's own folder, never the user's cache)
    monkeypatch.setattr(fp16_cpu, "backend_for", room)
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="fastest"))
    assert sorted(o["dtype"] for o in family.dtype_choice["options"]) == ["float16", "float32"]


@needs_fbgemm
def test_float16_weights_with_no_room_for_them_are_not_even_packed(tmp_path, monkeypatch):
    """An allocation refused inside the packing kernels can end the process (exit 139): with too
    little free (or too little room under ``ulimit -v``) the packing is not tried."""
    import decoders.backends.fp16_cpu as fp16_cpu
    import decoders.models.memory as memory

    packed = []
    monkeypatch.setattr(fp16_cpu, "backend_for", lambda *a, **k: packed.append(1))
    monkeypatch.setattr(memory, "available_memory", lambda device=None: 1000)
    family = load_family(FamilySpec(name="t", main=str(save_tiny_model(tmp_path / "m")), device="cpu",
                                    dtype="fastest"))
    assert packed == [] and family.dtype == torch.float32
    assert family.choice_note == "float16 weights were not timed: packing them needs about 204 KB and only 1.0 KB is " \
                                 "free; float32 it is"


@needs_fbgemm
def test_an_allocation_failing_while_the_targets_are_timed_is_one_line_naming_the_memory(tmp_path, monkeypatch):
    def no_room(backend, seq):
        raise RuntimeError(ALLOCATOR)

    monkeypatch.setattr(dtype_choice, "step_ms", no_room)
    path = save_tiny_model(tmp_path / "m")
    from decoders.core.errors import DecodeError
    from decoders.models.load_choice import PACKING_BYTES
    from decoders.models.memory import format_bytes

    with pytest.raises(DecodeError) as caught:
        load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="fastest", label="tiny"))
    weights = sum(p.numel() for p in load_family(FamilySpec(name="t", main=str(path), device="cpu",
                                                            dtype="float32")).main_model.parameters())
    assert str(caught.value) == (
        f"Not enough memory to load tiny: it needs about {format_bytes(weights * (4 + PACKING_BYTES))}; give --dtype "
        "float32 (one copy of the weights: no float16 copy packed and timed beside it), or a smaller model.")


def test_allocation_failures_are_told_from_other_errors():
    from decoders.models.memory import is_allocation_failure

    for failure in (MemoryError(), RuntimeError(ALLOCATOR), RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"),
                    OSError(12, "Cannot allocate memory"), RuntimeError("std::bad_alloc")):
        assert is_allocation_failure(failure), failure
    for other in (RuntimeError("shape mismatch"), ValueError("not enough memory"), OSError(2, "No such file")):
        assert not is_allocation_failure(other), other


@needs_fbgemm
def test_float16_weights_kept_as_the_faster_are_not_packed_without_room_for_them(tmp_path, monkeypatch):
    """The choice kept on a day with more memory: float32 this time (no segmentation fault), and said."""
    import decoders.models.memory as memory

    path = save_tiny_model(tmp_path / "m")
    monkeypatch.setattr(dtype_choice, "step_ms",
                        lambda backend, seq: 1.0 if isinstance(backend, Fp16LlamaBackend) else 2.0)
    assert load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="fastest")).dtype == torch.float16
    monkeypatch.setattr(memory, "available_memory", lambda device=None: 1000)
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="fastest"))
    assert family.dtype == torch.float32 and not isinstance(family.main, Fp16LlamaBackend)
    assert family.choice_note.startswith("the float16 weights kept as the faster cannot be packed now: packing them "
                                         "needs about 204 KB and only 1.0 KB is free; float32 this time; as measured")
    with pytest.raises(Exception) as caught:  # asked for by name: one line, no segmentation fault
        load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="float16"))
    assert str(caught.value) == ("Not enough memory for float16 weights: packing them needs about 204 KB and only "
                                 "1.0 KB is free; give --dtype float32, or a smaller model.")
