"""The prompt library (p): the shipped Spec-Bench prompts by task group, copy-heavy groups first,
and the user's own files; a first run of prompt lookup on a summarization prompt in at most four
keystrokes from the main screen."""

from __future__ import annotations

import json

import pytest

from decoders.models.drafts import Int4
from tests.support.app import make_app, run_and_wait, wait_for
from tui_decode.screens.pickers import PromptPicker
from tui_decode.state.prompt_library import library, shipped_prompts_file

pytestmark = pytest.mark.anyio
SIZE = (120, 40)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_the_shipped_library_lists_every_task_group_summarization_first(tmp_path):
    prompts, problems = library(folder=tmp_path / "none")
    assert problems == [] and shipped_prompts_file().is_file()
    groups = list(dict.fromkeys(p.group for p in prompts))
    assert groups[:2] == ["summarization", "retrieval-augmented generation"]
    assert set(groups) == {"summarization", "retrieval-augmented generation", "translation", "question answering",
                           "mathematical reasoning", "multi-turn conversation"}
    assert len(prompts) == 24


def test_the_users_own_files_come_after_and_a_bad_one_is_a_line_not_an_error(tmp_path):
    (tmp_path / "mine.txt").write_text("Summarise: the cat sat on the mat.")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe not utf-8")
    prompts, problems = library(folder=tmp_path)
    assert prompts[-1].group == "your prompts" and prompts[-1].text.startswith("Summarise")
    assert len(problems) == 1 and "bad.txt" in problems[0] and "UTF-8" in problems[0]


async def test_prompt_lookup_on_a_summarization_prompt_in_four_keystrokes(tiny_spec, loader, tmp_path, monkeypatch):
    """From the main screen: m (speculative -> prompt lookup), p (the library), ctrl+r (pick the
    first prompt, a summarization one, and run): three keystrokes, the target is at most four."""
    short = tmp_path / "short.jsonl"  # the tiny test model's context holds no real article
    short.write_text("\n".join(json.dumps(r) for r in [
        {"question_id": 1, "category": "writing", "turns": ["w10 w11 w12"]},
        {"question_id": 2, "category": "summarization", "turns": ["w10 w11 w12 w13 w10 w11 w12 w13 w10 w11"]},
    ]) + "\n")
    monkeypatch.setattr("tui_decode.state.prompt_library.shipped_prompts_file", lambda: short)
    monkeypatch.setenv("TUI_DECODE_PROMPTS_DIR", str(tmp_path / "no-prompts"))
    app = make_app(tiny_spec, loader, tmp_path, method="spec", max_new_tokens=12)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        keys = ["m", "p", "ctrl+r"]
        await pilot.press(keys[0])
        await pilot.press(keys[1])
        await wait_for(pilot, lambda: isinstance(app.screen, PromptPicker))
        result = await run_and_wait(pilot, app)  # presses keys[2], ctrl+r: the picker picks and runs
        assert len(keys) <= 4
        assert result.method.method == "pld" and main.prompt_pane.text.startswith("w10 w11 w12 w13")
        assert result.summary.speedup_decode is not None and main.status.state == "done"


def test_the_family_picker_marks_which_families_load_offline(tmp_path):
    from decoders.models.families import FamilySpec
    from tui_decode.screens.pickers import family_picker

    picker = family_picker({"smollm2-135m": FamilySpec(name="smollm2-135m", main="bundled", draft=Int4()),
                            "far": FamilySpec(name="far", main="SomeOrg/not-downloaded")}, None, tmp_path / "f.toml")
    lines = {o.id: str(o.prompt) for o in picker.options}
    assert "✓ offline" in lines["smollm2-135m"] and "needs a download" not in lines["smollm2-135m"]
    assert "⇣ needs a download" in lines["far"]


def test_the_family_picker_says_what_drafts_from_the_declared_draft(tmp_path):
    """Each family's line names its draft as the declared `Draft` holds it: a helper model's source
    (whose download the offline mark counts), an early-exit layer, a kind built from the main model."""
    from decoders.models.drafts import EarlyExit, Fastest, HelperModel, TrainedHead
    from decoders.models.families import FamilySpec
    from tui_decode.screens.pickers import family_picker

    drafts = {"helper": HelperModel(source="SomeOrg/not-downloaded"), "exit": EarlyExit(layer=20), "int4": Int4(),
              "head": TrainedHead(), "fastest": Fastest(), "none": None}
    families = {name: FamilySpec(name=name, main="bundled", draft=draft) for name, draft in drafts.items()}
    lines = {o.id: str(o.prompt) for o in family_picker(families, None, tmp_path / "f.toml").options}
    assert "main bundled · helper SomeOrg/not-downloaded · auto/auto" in lines["helper"]
    assert "⇣ needs a download" in lines["helper"] and "✓ offline" in lines["exit"]
    assert "main bundled · helper early exit @ layer 20 · auto/auto" in lines["exit"]
    assert "main bundled · helper int4 self-draft · auto/auto" in lines["int4"]
    assert "main bundled · helper head self-draft · auto/auto" in lines["head"]
    assert "main bundled · helper fastest self-draft · auto/auto" in lines["fastest"]
    assert "main bundled · auto/auto" in lines["none"]
