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
    assert family.describe()["dtype_choice"] == "float32 (float16 weights cannot run here: the transformers backend " \
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
    assert family.describe()["dtype"] == "float16 weights, float32 activations"
    assert family.describe()["dtype_choice"].startswith("float16 weights, the faster here")
    monkeypatch.setattr(dtype_choice, "step_ms",
                        lambda backend, seq: 3.0 if isinstance(backend, Fp16LlamaBackend) else 2.0)
    # measured again (the first choice is kept, tests/models/test_kept_choice.py)
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu", dtype="fastest", remeasure=True))
    assert not isinstance(family.main, Fp16LlamaBackend) and family.dtype == torch.float32
    assert family.describe()["dtype"] == "float32"
    assert sorted(o["dtype"] for o in family.dtype_choice["options"]) == ["float16", "float32"]


def test_off_the_cpu_and_in_a_plain_family_nothing_is_measured(tmp_path):
    path = save_tiny_model(tmp_path / "m")
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu"))
    assert family.dtype_choice is None and "dtype_choice" not in family.describe()
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
    assert family.describe()["dtype"] == ("float16 weights, float32 activations" if best["dtype"] == "float16"
                                          else "float32")
    assert family.draft_choice is not None and family.self_draft in ("int4", "head")
    result = Engine(family).run("Count to five.", DecodeParams(method="spec", gamma=3, max_new_tokens=12))
    assert result.summary.identical is True
