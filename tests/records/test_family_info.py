"""The ``family`` of a saved run and of report.json declared once (`FamilyInfo`): a family as runs
and reports before it was a record wrote it (the keys each version wrote, in their shapes, or none)
opens with its values as attributes and writes back as it was written; a field of the wrong type is
refused in one line naming it, as every other field of the file is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec import UNSET

from decoders.core.errors import DecodeError
from decoders.records.family_info import FamilyInfo
from decoders.records.run import RunResult

DATA = Path(__file__).resolve().parents[1] / "data"

#: the family of a run saved before the draft and the threads were recorded (tests/data/run_spec.json)
OLD_RUN = {"label": "SmolLM2-135M-Instruct (Q4_1 GGUF, bundled)", "main": "bundled",
           "helper": "early exit @ layer 20", "device": "cpu", "dtype": "float32"}
#: a run on llama.cpp with a kept "fastest" choice, its draft declared and its threads
NEWER_RUN = {"label": "fam", "main": "/models/m.gguf", "helper": None, "device": "cpu", "dtype": "Q4_1 (llama.cpp)",
             "draft": {"kind": "early-exit", "layer": 2}, "device_map": "auto: cpu", "draft_choice": "int4 drafts",
             "dtype_choice": "float32", "choice_measured": "2026-12-01", "backend": "llamacpp", "threads": 4}
#: the family of a bench report (tests/data/report_bench.json): the backend's class, weight bytes, layers
REPORT = {"label": "model", "main": "/tmp/golden/old/model", "helper": "early exit @ layer 1", "device": "cpu",
          "dtype": "float32", "backend": "LlamaBackend", "weight_bytes": 81920, "n_layers": 2}


def saved_run(tmp_path: Path, family) -> Path:
    data = json.loads((DATA / "run_spec.json").read_text())
    data["family"] = family
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("family", [OLD_RUN, NEWER_RUN, REPORT, {}, {"label": None, "dtype": None}])
def test_a_family_of_every_shape_written_opens_and_writes_back_as_it_was(tmp_path, family):
    info = FamilyInfo.from_json(family)
    assert info.to_json() == family and list(info.to_json()) == list(family)  # the same keys, in their order
    result = RunResult.load(saved_run(tmp_path, family))
    assert result.family == info and json.loads(result.dumps())["family"] == family


def test_its_values_are_attributes_and_a_key_not_written_is_unset(tmp_path):
    old = RunResult.load(DATA / "run_spec.json").family
    assert (old.label, old.main, old.helper, old.device, old.dtype) == tuple(OLD_RUN.values())
    assert old.draft is UNSET and old.threads is UNSET and old.backend is UNSET
    newer = RunResult.load(saved_run(tmp_path, NEWER_RUN)).family
    assert newer.draft == {"kind": "early-exit", "layer": 2} and newer.threads == 4 and newer.helper is None


def test_a_key_this_version_does_not_know_is_ignored(tmp_path):
    result = RunResult.load(saved_run(tmp_path, {**OLD_RUN, "from_a_later_version": [1, 2]}))
    assert result.family == FamilyInfo.from_json(OLD_RUN)


@pytest.mark.parametrize("change,message", [
    ({"helper": 5}, "family.helper must be text or null, got int"),
    ({"device": {"gpu": [1]}}, "family.device must be text or null, got object"),
    ({"weight_bytes": "big"}, "family.weight_bytes must be an integer, got str"),
    ({"draft": "early exit"}, "family.draft must be an object, got str"),
])
def test_a_field_of_the_wrong_type_is_refused_in_one_line(tmp_path, change, message):
    path = saved_run(tmp_path, {**OLD_RUN, **change})
    with pytest.raises(DecodeError) as err:
        RunResult.load(path)
    assert f": {message}; " in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert str(path) in str(err.value)
