"""`tui-decode run` and the kept dtype and draft choice: a method that drafts with nothing measures
no draft; `--remeasure` measures again; each load says in one line where its choice came from."""

from __future__ import annotations

from collections import Counter

import pytest

import decoders.models.draft_choice as draft_choice
import decoders.models.dtype_choice as dtype_choice
from tests.cli.conftest import error_line
from tests.support.quantized import peaked_model
from tests.support.tiny import save_tiny_model
from tui_decode.cli.main import main


@pytest.fixture
def family(isolated, monkeypatch):
    """A family of a tiny model that chooses its dtype and draft at load, as the bundled one does;
    and a counter of what each load measures."""
    monkeypatch.setenv("COLUMNS", "1000")  # each stderr line whole
    path = save_tiny_model(isolated / "m", model=peaked_model(layers=2))
    (isolated / "config" / "families.toml").write_text(
        f'[families.tiny]\nmain = "{path}"\nself_draft = "fastest"\ndtype = "fastest"\n', encoding="utf-8")
    calls: Counter[str] = Counter()
    for module, name in ((draft_choice, "choose_for_family"), (draft_choice, "measure_acceptance"),
                         (dtype_choice, "choose_target")):
        real = getattr(module, name)

        def counted(*args, _name=name, _real=real, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return calls


def _run(capsys, *flags: str) -> str:
    assert main(["run", "--family", "tiny", "--prompt", "w5 w6 w7", "--max-new-tokens", "3", *flags]) == 0
    return capsys.readouterr().err


def test_a_method_that_drafts_with_nothing_measures_no_draft(family, capsys):
    for method in ("ar", "pld", "jacobi", "lookahead"):
        _run(capsys, "--method", method)
    assert family["choose_for_family"] == 0 and family["measure_acceptance"] == 0
    err = _run(capsys, "--method", "spec")  # the first run that drafts measures the draft, once
    assert family["choose_for_family"] >= 1 and "draft: int4 self-draft" in err
    family.clear()
    err = _run(capsys, "--method", "ar")
    assert sum(family.values()) == 0  # the dtype from the choice kept with the draft
    assert "choice: as measured on this machine on " in err and "(--remeasure measures again)" in err


def test_remeasure_measures_again_and_says_so(family, capsys):
    _run(capsys, "--method", "spec")
    family.clear()
    _run(capsys, "--method", "spec")
    assert sum(family.values()) == 0
    err = _run(capsys, "--method", "spec", "--remeasure")
    assert family["choose_for_family"] >= 1
    lines = [line for line in err.splitlines() if line.startswith("choice:")]
    assert lines and lines[0].startswith("choice: measured again on request; measured on this machine now and kept")


def test_remeasure_on_a_family_that_chooses_nothing_is_one_line(isolated, capsys):
    err = error_line(capsys, ["run", "--remeasure", "--dtype", "float32", "--self-draft", "int4", "--prompt", "hi"])
    assert "--remeasure measures again the dtype and draft a family chooses at load" in err
    assert "leave --remeasure out" in err
