"""The "fastest" dtype and draft are kept per machine: the first load measures and keeps the choice
(`decoders.models.kept_choice`), a later load with the same key reuses it without measuring and
builds only the chosen target and draft; another CPU or torch, a damaged file, or a request to
measure again means measuring again, said in one line. The load's progress never goes back."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date

import msgspec
import pytest

import decoders.models.draft_choice as draft_choice
import decoders.models.dtype_choice as dtype_choice
import decoders.models.kept_choice as kept_choice
from decoders.backends.fp16_cpu import fbgemm_reason
from decoders.models.drafts import Fastest, TrainedHead
from decoders.models.family import FamilySpec, load_family
from tests.support.heads import write_head
from tests.support.quantized import peaked_model
from tests.support.tiny import save_tiny_model

needs_fbgemm = pytest.mark.skipif(fbgemm_reason() is not None, reason="no fbgemm float16 kernels in this torch")


class Spy:
    """Counts what a load measures (drafts timed and judged, targets timed) and which drafts it builds."""

    def __init__(self, monkeypatch):
        self.calls: Counter[str] = Counter()
        self.built: list[str] = []
        for module, name in ((draft_choice, "choose"), (draft_choice, "measure_acceptance"),
                             (dtype_choice, "choose_target"), (dtype_choice, "step_ms")):
            monkeypatch.setattr(module, name, self._counted(name, getattr(module, name)))
        build = draft_choice.build_draft

        def built(spec, main, model, kind):
            self.built.append(kind)
            return build(spec, main, model, kind)

        monkeypatch.setattr(draft_choice, "build_draft", built)

    def _counted(self, name, function):
        def counted(*args, **kwargs):
            self.calls[name] += 1
            return function(*args, **kwargs)

        return counted

    @property
    def measured(self) -> int:
        return sum(self.calls.values())

    def reset(self) -> None:
        self.calls.clear()
        self.built.clear()


@pytest.fixture
def spec(tmp_path):
    """A tiny model (int4-able) with a trained head: both drafts, and both target dtypes, to choose from."""
    path = save_tiny_model(tmp_path / "m", model=peaked_model(layers=5))
    write_head(tmp_path / "h", "eagle3")
    return FamilySpec(name="t", main=str(path), draft=Fastest(head=TrainedHead(folder=str(tmp_path / "h"))), dtype="fastest",
                      device="cpu")


def _record(family) -> kept_choice.KeptChoice:
    files = list(kept_choice.choices_root().glob("*.json"))
    assert len(files) == 1, files
    return msgspec.json.decode(files[0].read_bytes(), type=kept_choice.KeptChoice)


@needs_fbgemm
def test_the_choice_is_kept_and_a_second_load_measures_nothing_and_builds_only_the_chosen(spec, monkeypatch):
    spy = Spy(monkeypatch)
    first = load_family(spec)
    assert spy.calls["choose_target"] == 1 and spy.calls["choose"] == 2  # both targets, each with its drafts
    assert spy.calls["measure_acceptance"] == 2  # each draft judged once, on the first target
    assert sorted(spy.built) == ["head", "head", "int4", "int4"]
    kept = _record(first)
    assert kept.draft == first.self_draft and kept.dtype == ("float16" if "float16" in str(first.dtype) else "float32")
    assert kept.key.cpu == kept_choice.cpu_features() and kept.key.threads == 1 and kept.key.dtype == "fastest"
    assert kept.date == date.today().isoformat() and kept.draft_choice == first.draft_choice
    assert first.choice_note.startswith("measured on this machine now and kept in ") and not first.choice_reused

    spy.reset()
    second = load_family(spec)
    assert spy.measured == 0, spy.calls  # no timing, no acceptance measured
    assert spy.built == [second.self_draft] == [first.self_draft]  # only the chosen draft is built
    assert type(second.main) is type(first.main) and second.dtype == first.dtype
    assert second.describe().draft_choice == first.describe().draft_choice
    assert second.describe().dtype_choice == first.describe().dtype_choice
    assert second.choice_reused and second.describe().choice_measured == kept.date
    assert second.choice_note == f"as measured on this machine on {kept.date}, kept"


@needs_fbgemm
def test_the_load_bar_never_goes_back(spec):
    """Each target's timing and then its drafts' report in turn; the fractions only rise."""
    seen: list[float] = []
    load_family(spec, progress=lambda message, fraction=None: seen.append(fraction) if fraction is not None else None)
    assert seen == sorted(seen) and seen[-1] == 1.0, seen
    assert len(seen) >= 8  # the measuring steps are there (they went 0.93 -> 0.9 before)


@needs_fbgemm
@pytest.mark.parametrize("change, said", [
    ("cpu", "was measured on a CPU with other vector features; measured again"),
    ("torch", "was measured with torch 2.0.0 (now "),
])
def test_another_cpu_or_torch_measures_again(spec, monkeypatch, change, said):
    with pytest.MonkeyPatch.context() as elsewhere:
        if change == "cpu":
            elsewhere.setattr(kept_choice, "cpu_features", lambda: "avx avx2 f16c fma torch:AVX2")
        else:
            elsewhere.setattr(kept_choice, "torch_version", lambda: "2.0.0")
        load_family(spec)
    spy = Spy(monkeypatch)  # this machine and torch again
    family = load_family(spec)
    assert spy.calls["choose_target"] == 1 and spy.calls["choose"] == 2
    assert said in family.choice_note and "\n" not in family.choice_note
    assert family.choice_note.endswith(f"measured on this machine now and kept in {kept_choice.choice_file(_record(family).key)}")
    spy.reset()
    load_family(spec)
    assert spy.measured == 0  # kept again, for this machine


@needs_fbgemm
@pytest.mark.parametrize("content, said", [
    (b"{not json", "is damaged (JSON is malformed"),
    (b"", "is damaged"),
    (json.dumps({"version": 1, "key": {"cpu": "x"}, "measured": "today"}).encode(), "is damaged"),
    (json.dumps({"version": 99}).encode(), "was written by another version of tui-decode"),
    (b"[1, 2]", "is damaged"),
    (b"\xff\xfe garbage", "is damaged"),
    ("folder", "is not a file"),
])
def test_a_damaged_or_foreign_record_is_measured_again_in_one_line(spec, monkeypatch, content, said):
    spy = Spy(monkeypatch)
    first = load_family(spec)
    path = kept_choice.choice_file(_record(first).key)
    path.unlink()
    if content == "folder":
        path.mkdir()
    else:
        path.write_bytes(content)
    spy.reset()
    family = load_family(spec)
    assert spy.calls["choose"] == 2, spy.calls
    assert f"the kept choice {path} {said}" in family.choice_note and "\n" not in family.choice_note
    assert family.self_draft in ("int4", "head")


@needs_fbgemm
def test_a_record_whose_choice_is_not_valid_is_measured_again(spec, monkeypatch):
    """A kept record names its dtype and draft from a fixed list, each with its sentence."""
    first = load_family(spec)
    path = kept_choice.choice_file(_record(first).key)
    for change in ({"draft": "early-exit"}, {"dtype": "bfloat16"}, {"draft_choice": {"chosen": "int4"}},
                   {"draft": None}):
        record = json.loads(path.read_text()) | change
        path.write_text(json.dumps(record))
        with pytest.MonkeyPatch.context() as spied:
            spy = Spy(spied)
            family = load_family(spec)
        assert spy.calls["choose"] == 2, change
        assert "is damaged" in family.choice_note, change


@needs_fbgemm
def test_remeasure_measures_again_and_keeps_the_new_choice(spec, monkeypatch):
    from dataclasses import replace

    load_family(spec)
    spy = Spy(monkeypatch)
    family = load_family(replace(spec, remeasure=True))
    assert spy.calls["choose_target"] == 1 and spy.calls["choose"] == 2
    assert family.choice_note.startswith("measured again on request; measured on this machine now and kept")
    spy.reset()
    load_family(spec)
    assert spy.measured == 0


def test_a_cache_folder_that_cannot_be_written_costs_a_measurement_not_the_load(tmp_path, monkeypatch):
    """A choice that cannot be kept is said, and the family loads with what was measured."""
    path = save_tiny_model(tmp_path / "m", model=peaked_model(layers=2))
    (tmp_path / "file").write_text("x")
    monkeypatch.setattr(kept_choice, "choices_root", lambda: tmp_path / "file" / "choices")
    spec = FamilySpec(name="t", main=str(path), draft=Fastest(), device="cpu")
    family = load_family(spec)
    assert family.self_draft == "int4" and family.helper is not None
    assert family.choice_note.startswith(f"the choice could not be kept in {tmp_path / 'file' / 'choices'} (")
    assert family.choice_note.endswith("; the next start measures again") and "\n" not in family.choice_note


def test_a_family_loaded_without_its_draft_chooses_the_dtype_alone_and_a_later_draft_is_measured(tmp_path,
                                                                                                monkeypatch):
    """`run --method ar` drops the 'fastest' draft: no draft measured, the dtype kept alone; a load
    that drafts then measures the draft (with the dtype), and the next one without a draft reuses it."""
    from dataclasses import replace

    path = save_tiny_model(tmp_path / "m", model=peaked_model(layers=2))
    spec = FamilySpec(name="t", main=str(path), draft=Fastest(), dtype="fastest", device="cpu")
    spy = Spy(monkeypatch)
    plain = load_family(replace(spec, draft=None))
    assert plain.helper is None and spy.calls["choose"] == 0 and spy.calls["measure_acceptance"] == 0
    assert spy.built == []
    if fbgemm_reason() is None:
        assert spy.calls["choose_target"] == 1 and _record(plain).draft is None and _record(plain).dtype is not None
    spy.reset()
    drafting = load_family(spec)
    assert spy.calls["choose"] >= 1 and drafting.self_draft == "int4"
    assert _record(drafting).draft == "int4"
    if fbgemm_reason() is None:
        assert "no draft chosen here yet" in drafting.choice_note
    spy.reset()
    again = load_family(replace(spec, draft=None))
    assert spy.measured == 0 and spy.built == [] and again.dtype == drafting.dtype


def test_the_key_names_the_machine_the_model_and_the_head(tmp_path):
    """Vector features only (no other flags), the weights' fingerprint, and the head's files."""
    features = kept_choice.cpu_features()
    assert "torch:" in features and " smep" not in f" {features} " and " ht " not in f" {features} "
    head = tmp_path / "h"
    write_head(head, "eagle3")
    before = kept_choice.folder_identity(head)
    assert kept_choice.folder_identity(head) == before and kept_choice.folder_identity(None) == "none"
    (head / "training.json").write_text("{}")
    assert kept_choice.folder_identity(head) != before  # retrained: measured again
    key = kept_choice.ChoiceKey("avx2", "2.13", "m", "fast", 1, "cpu", "fastest")
    other = msgspec.structs.replace(key, threads=2)
    assert kept_choice.choice_file(key) != kept_choice.choice_file(other)  # one file per thread count
    assert kept_choice.choice_file(key) == kept_choice.choice_file(msgspec.structs.replace(key, cpu="avx512f"))


@needs_fbgemm
def test_a_kept_draft_that_cannot_be_built_now_measures_the_drafts_again(spec, monkeypatch):
    """Say the int4 copy no longer fits in the free memory: the load goes on with the other draft,
    measured, on the kept target, and says why in one line."""
    from decoders.core.errors import DecodeError

    first = load_family(spec)
    kept = _record(first)
    build = draft_choice.build_draft

    def refuse(spec, main, model, kind):
        if kind == first.self_draft:
            raise DecodeError(f"Cannot build an {kind} draft: too little memory.")
        return build(spec, main, model, kind)

    monkeypatch.setattr(draft_choice, "build_draft", refuse)
    family = load_family(spec)
    assert family.self_draft not in (None, first.self_draft) and family.dtype == first.dtype
    assert family.choice_note.startswith(f"the kept draft ({first.self_draft}) cannot be built now (Cannot build an "
                                         f"{first.self_draft} draft: too little memory); the drafts measured again")
    again = _record(family)
    assert again.draft == family.self_draft and again.dtype == kept.dtype  # the kept target's dtype stays
    assert again.dtype_choice == kept.dtype_choice
