"""The draft as one declared type (`decoders.models.drafts`): the kinds, their plain forms, the old
field names still read (families.toml, saved runs), and a kind added by one declaration, one
builder and its view, which `run`, `bench` and the app then offer with no other change.

Tiny random models (tests/tiny.py), seconds."""

from __future__ import annotations

import json
import re

import msgspec
import pytest

from decoders.core.errors import DecodeError
from decoders.models.drafts import (
    DRAFT_KINDS,
    Draft,
    DraftKind,
    EarlyExit,
    Fastest,
    HelperModel,
    Int4,
    TrainedHead,
    decode_draft,
    encode_draft,
    legacy_draft,
    registered,
    run_draft,
    self_draft_kinds,
)
from decoders.models.families import user_families
from decoders.models.family import FamilySpec, load_family
from decoders.records.family_info import FamilyInfo
from tests.support.app import PROMPT, SIZE, errors, run_and_wait, wait_for
from tests.support.tiny import save_tiny_model
from tui_decode.cli.main import main as cli_main


class FirstLayer(Draft, frozen=True, tag="first-layer"):
    """The test's own kind: the main model's first layer drafts (as ``early-exit 1`` would)."""


def first_layer(draft: FirstLayer, target) -> object:
    return target.main.early_exit(1)


#: The one declaration a new kind needs: its record, its builder and its view.
FIRST_LAYER = DraftKind(FirstLayer, first_layer, lambda draft: "first layer only", help="the first layer")


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("drafts") / "model", vocab=64, layers=3)


# -- the type ----------------------------------------------------------------------------------------

def test_each_kind_is_one_value_with_a_plain_form_that_reads_back():
    for draft in (HelperModel(source="org/small"), EarlyExit(layer=20), Int4(), TrainedHead(folder="h", vocab=64),
                  Fastest(head=TrainedHead(folder="h"))):
        plain = encode_draft(draft)
        assert plain is not None and plain["kind"] == draft.kind
        assert decode_draft(json.loads(json.dumps(plain))) == draft
    assert encode_draft(EarlyExit(layer=20)) == {"kind": "early-exit", "layer": 20}
    assert [EarlyExit(layer=2).view(), Int4().view(), TrainedHead().view()] == \
        ["early exit @ layer 2", "int4 self-draft", "trained head"]


@pytest.mark.parametrize("plain,message", [
    ({"kind": "int9"}, "Invalid value 'int9'"),
    ({"kind": "early-exit"}, "missing required field `layer`"),
    ({"kind": "early-exit", "layer": 0}, "Expected `int` >= 1"),
    ({"kind": "early-exit", "layer": 1 << 40}, "Expected `int` <= 1024"),
    ({"kind": "int4", "layer": 3}, "unknown field `layer`"),
])
def test_a_draft_that_is_no_kind_is_one_line(plain, message):
    with pytest.raises(ValueError) as err:
        decode_draft(plain)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_old_field_names_become_the_same_draft():
    assert legacy_draft(helper="org/small") == HelperModel(source="org/small")
    assert legacy_draft(self_draft_layer=20) == EarlyExit(layer=20)
    assert legacy_draft(self_draft="int4") == Int4()
    assert legacy_draft(head="h") == legacy_draft(self_draft="head", head="h") == TrainedHead(folder="h")
    assert legacy_draft(self_draft="fastest", head="h", head_vocab=64, head_vocab_from="r.json") == \
        Fastest(head=TrainedHead(folder="h", vocab=64, vocab_from="r.json"))
    assert legacy_draft() is None
    spec = FamilySpec(name="f", main="m", draft=EarlyExit(layer=3))  # the spec's older names, as views of it
    assert (spec.helper, spec.self_draft_layer, spec.self_draft, spec.head) == (None, 3, None, None)


def test_a_families_file_in_the_old_or_the_new_form_opens_to_the_same_drafts(tmp_path):
    old = tmp_path / "old.toml"
    old.write_text('[families.exit]\nmain = "bundled"\nself_draft_layer = 20\n'
                   '[families.pair]\nmain = "org/big"\nhelper = "org/small"\n'
                   '[families.q]\nmain = "bundled"\nself_draft = "int4"\n'
                   '[families.h]\nmain = "bundled"\nhead = "h"\nhead_vocab = 64\nhead_vocab_from = "r.json"\n'
                   '[families.fast]\nmain = "bundled"\nself_draft = "fastest"\n')
    new = tmp_path / "new.toml"
    new.write_text('[families.exit]\nmain = "bundled"\ndraft = { kind = "early-exit", layer = 20 }\n'
                   '[families.pair]\nmain = "org/big"\ndraft = { kind = "helper", source = "org/small" }\n'
                   '[families.q]\nmain = "bundled"\ndraft = { kind = "int4" }\n'
                   '[families.h]\nmain = "bundled"\n[families.h.draft]\nkind = "head"\nfolder = "h"\nvocab = 64\n'
                   'vocab_from = "r.json"\n'
                   '[families.fast]\nmain = "bundled"\ndraft = { kind = "fastest" }\n')
    drafts = {name: spec.draft for name, spec in user_families(old).items()}
    assert drafts == {"exit": EarlyExit(layer=20), "pair": HelperModel(source="org/small"), "q": Int4(),
                      "h": TrainedHead(folder="h", vocab=64, vocab_from="r.json"), "fast": Fastest()}
    assert {name: spec.draft for name, spec in user_families(new).items()} == drafts


@pytest.mark.parametrize("table,message", [
    ('draft = { kind = "int4" }\nhelper = "x"', "sets `draft` and `helper`; keep `draft`"),
    ('draft = { kind = "early-exit", layer = -1 }', "Expected `int` >= 1"),
    ('draft = { kind = "warp" }', "not a draft"),
    ('helper = "x"\nself_draft_layer = 3', "sets both `helper` and `self_draft_layer`; keep one."),
])
def test_a_families_file_asking_for_two_drafts_or_none_known_is_one_line(tmp_path, table, message):
    path = tmp_path / "families.toml"
    path.write_text(f'[families.f]\nmain = "bundled"\n{table}\n')
    with pytest.raises(DecodeError) as err:
        user_families(path)
    assert message in str(err.value) and "[families.f]" in str(err.value) and "\n" not in str(err.value)


def test_a_saved_run_names_its_draft_and_an_old_one_is_read_from_its_helper_text():
    from decoders.records.run import RunResult
    from tests.support.app import DATA

    old = RunResult.load(DATA / "run_spec.json")  # saved before the draft was recorded
    assert "draft" not in old.family.to_json() and run_draft(old.family) == EarlyExit(layer=20)
    def draft_of(family):
        return run_draft(FamilyInfo.from_json(family))

    assert draft_of({"helper": "int4 self-draft"}) == Int4()
    assert draft_of({"helper": "eagle3 head /heads/smol"}) == TrainedHead(folder="/heads/smol")
    assert draft_of({"helper": "org/small"}) == HelperModel(source="org/small")
    assert draft_of({"helper": None}) is None and draft_of({}) is None
    assert draft_of({"helper": "early exit @ layer 3", "draft": {"kind": "early-exit", "layer": 3}}) == \
        EarlyExit(layer=3)
    assert draft_of({"draft": {"kind": "a kind to come"}}) is None  # the run still opens


def test_a_saved_run_records_its_draft(tiny_folder):
    from decoders.core.params import DecodeParams
    from decoders.engine import Engine

    family = load_family(FamilySpec(name="t", main=str(tiny_folder), draft=EarlyExit(layer=2), device="cpu"))
    result = Engine(family, pairing="sequential").run("w1 w2 w3", DecodeParams(method="spec", max_new_tokens=4))
    assert result.family.draft == {"kind": "early-exit", "layer": 2}
    assert result.family.helper == "early exit @ layer 2"
    assert run_draft(FamilyInfo.from_json(msgspec.json.decode(msgspec.json.encode(result.family))))\
        == EarlyExit(layer=2)


# -- a kind added by one declaration, one builder and its view --------------------------------------

def pane_text(widget) -> str:
    """What ``widget`` draws, as plain text."""
    import io

    from rich.console import Console

    console = Console(width=60, file=io.StringIO(), record=True)
    console.print(widget.render())
    return console.export_text()


def test_a_kind_declared_here_is_offered_by_the_command_line(tmp_path, tiny_folder, capsys):
    argv = ["run", "--main", str(tiny_folder), "--self-draft", "first-layer", "--method", "spec",
            "--max-new-tokens", "6", "--threads", "1", "--json", "-", "--prompt", "w1 w2 w3 w1 w2"]
    assert cli_main(argv) == 2  # not declared yet: one line naming the kinds
    err = capsys.readouterr().err
    assert "unknown --self-draft kind 'first-layer'; choose one of int4, head, fastest" in err
    with registered(FIRST_LAYER):
        assert "first-layer" in self_draft_kinds()
        assert cli_main(argv) == 0
        data = json.loads(capsys.readouterr().out)
    assert data["family"]["helper"] == "first layer only"
    assert data["family"]["draft"] == {"kind": "first-layer"}
    assert data["summary"]["identical"] is True and data["summary"]["drafted"] > 0
    assert "first-layer" not in DRAFT_KINDS  # gone with the block


def test_a_kind_declared_here_is_a_bench_variant(tmp_path, tiny_folder, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"question_id": 81, "category": "writing", "turns": ["w5 w6 w7 w8 w5 w6 w7"]}))
    argv = ["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--limit", "1",
            "--variants", "spec[first-layer]", "--record-overhead-every", "0", "--max-new-tokens", "6",
            "--bandwidth-mb", "4", "--out", str(tmp_path / "out")]
    with registered(FIRST_LAYER):
        code = cli_main(argv)
        out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["settings"]["methods"] == ["ar", "spec[first-layer]"]
    [row] = [r for r in report["settings"]["variants"] if r["label"] == "spec[first-layer]"]
    assert row["draft"] == "first-layer" and row["draft_source"] == "first layer only"
    assert "| Speculative [first-layer] |" in out


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_kind_declared_here_is_on_the_apps_draft_row(tmp_path, tiny_folder, anyio_backend):
    from decoders.engine import Engine
    from tui_decode.app import TuiDecodeApp
    from tui_decode.state.settings import START_PARAMS, Settings

    spec = FamilySpec(name="tiny", main=str(tiny_folder), device="cpu", dtype="float32", label="tiny")
    family = load_family(spec)
    with registered(FIRST_LAYER):
        app = TuiDecodeApp(spec, load_family=lambda s, progress: family, engine_factory=Engine,
                           runs_folder=tmp_path / "runs", prompt=PROMPT, cursor_blink=False,
                           settings=Settings(START_PARAMS.replace(method="spec", max_new_tokens=12)))
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await wait_for(pilot, lambda: app.main_screen.loaded is not None)
            screen = app.main_screen
            screen.params_pane.focus()
            screen.params_pane.select_key("draft_layer")
            await pilot.pause()
            assert screen.settings.draft == EarlyExit(layer=2)
            await pilot.press("right")  # early exit @ layer 2 -> the int4 self-draft (built in a worker)
            assert screen.settings.draft == Int4()
            await wait_for(pilot, lambda: screen.building_draft is None)
            await pilot.press("right")  # -> the kind declared here, the row's last choice
            assert screen.settings.draft == FirstLayer()
            await wait_for(pilot, lambda: screen.building_draft is None)
            assert screen.status.message.startswith("first-layer self-draft ready: ")
            assert re.search(r"draft model +first layer only", pane_text(screen.params_pane))
            result = await run_and_wait(pilot, app)
            assert result.family.helper == "first layer only" and result.family.draft == {"kind": "first-layer"}
            assert result.method.ids == result.baseline.ids
            assert errors(app) == []
