"""The int4 self-draft in the app: the draft row offers it next to the early-exit layers (and a
family's own helper model); choosing it builds the draft in a worker beside the loaded main
model, and a model the kernel cannot take, or too little memory, is one line with the models kept.
Tiny random models (tests/tiny.py) whose shapes suit the int4 kernel, and one whose do not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from decoders.engine import Engine
from decoders.models.drafts import HelperModel, Int4
from decoders.models.family import FamilySpec, load_family
from tests.support.app import PROMPT, SIZE, errors, run_and_wait, wait_for
from tests.support.tiny import save_tiny_model, tiny_llama_config
from tui_decode.app import TuiDecodeApp
from tui_decode.state.settings import START_PARAMS, Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def odd_model():
    """A tiny Llama whose down_proj reads 40 inputs: not whole groups of 32 for the int4 kernel."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    config = tiny_llama_config(vocab=64, layers=3)
    config.intermediate_size = 40
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    root = tmp_path_factory.mktemp("selfdraft")
    good = save_tiny_model(root / "good", vocab=64, layers=3)
    odd = save_tiny_model(root / "odd", model=odd_model())
    helper = save_tiny_model(root / "helper", vocab=64, layers=2, seed=1)
    specs = {name: FamilySpec(name=name, main=str(folder), device="cpu", dtype="float32", label=f"tiny {name}")
             for name, folder in (("good", good), ("odd", odd))}
    specs["pair"] = FamilySpec(name="pair", main=str(good), draft=HelperModel(source=str(helper)), device="cpu", dtype="float32",
                               label="tiny pair")
    return specs, {name: load_family(spec) for name, spec in specs.items()}


def make_app(families, name, tmp_path):
    specs, loaded = families
    calls: list[str] = []

    def load(spec, progress):
        calls.append(spec.name)
        return loaded[spec.name]

    app = TuiDecodeApp(specs[name], load_family=load, engine_factory=Engine, runs_folder=tmp_path / "runs",
                       prompt=PROMPT, settings=Settings(START_PARAMS.replace(method="spec", max_new_tokens=16)),
                       cursor_blink=False)
    return app, calls


def pane_text(widget) -> str:
    """What ``widget`` draws, as plain text."""
    import io

    from rich.console import Console

    console = Console(width=60, file=io.StringIO(), record=True)
    console.print(widget.render())
    return console.export_text()


async def to_draft_row(pilot, app):
    await wait_for(pilot, lambda: app.main_screen.loaded is not None)
    screen = app.main_screen
    screen.params_pane.focus()
    screen.params_pane.select_key("draft_layer")
    await pilot.pause()
    return screen


async def test_choosing_int4_builds_it_beside_the_main_model_and_the_next_run_drafts_with_it(families, tmp_path):
    app, calls = make_app(families, "good", tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await to_draft_row(pilot, app)
        main = screen.loaded.engine.family.main
        assert screen.settings.draft_layer == 2 and screen.settings.self_draft is None
        await pilot.press("right")  # early exit @ layer 2 -> int4 self-draft
        assert screen.settings.self_draft == "int4"
        assert re.search(r"draft model +int4 self-draft", pane_text(screen.params_pane))
        await wait_for(pilot, lambda: screen.building_draft is None)
        assert screen.status.state == "done" and screen.status.message.startswith("int4 self-draft ready: ")
        assert "beside the main model" in screen.status.message

        result = await run_and_wait(pilot, app)
        assert result.family.helper == "int4 self-draft"
        assert str(screen.stream.border_title).endswith("· int4 self-draft")
        assert result.method.ids == result.baseline.ids  # the verifier keeps the target's output
        assert screen.loaded.engine.family.main is main and calls == ["good"]  # no reload of the main model

        await pilot.press("left")  # back to early exit
        assert screen.settings.self_draft is None and screen.settings.draft_layer == 2
        again = await run_and_wait(pilot, app)
        assert again.family.helper == "early exit @ layer 2"
        assert again.summary.pairing == "interleaved" and calls == ["good"]
        assert errors(app) == []


async def test_a_model_the_int4_kernel_cannot_take_is_one_line_and_the_models_stay(families, tmp_path):
    app, calls = make_app(families, "odd", tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await to_draft_row(pilot, app)
        engine = screen.loaded.engine
        await pilot.press("right")
        await wait_for(pilot, lambda: screen.building_draft is None and errors(app))
        [message] = errors(app)
        assert message.startswith("Cannot build an int4 self-draft of this model: down_proj reads 40 inputs")
        assert "group size 32" in message and "\n" not in message and "--" not in message
        assert screen.status.state == "error"
        assert screen.settings.self_draft is None and screen.settings.draft_layer == 2  # back to early exit
        assert screen.loaded.engine is engine and calls == ["odd"]
        result = await run_and_wait(pilot, app)  # the loaded models still run
        assert result.family.helper == "early exit @ layer 2"


async def test_too_little_memory_for_int4_is_one_line_and_the_models_stay(families, tmp_path, monkeypatch):
    import decoders.models.memory

    monkeypatch.setattr(decoders.models.memory, "available_memory", lambda device=None: 10_000)
    app, calls = make_app(families, "good", tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await to_draft_row(pilot, app)
        await pilot.press("right")
        await wait_for(pilot, lambda: screen.building_draft is None and errors(app))
        [message] = errors(app)
        assert message.startswith("Not enough memory for an int4 self-draft of this model")
        assert "only 10 KB is free in main memory" in message and "--" not in message
        assert screen.settings.self_draft is None and not screen.loaded.engine.has_draft(Int4())
        assert calls == ["good"]


async def test_a_family_with_a_helper_model_offers_int4_beside_it_and_goes_back(families, tmp_path):
    app, calls = make_app(families, "pair", tmp_path)
    helper = families[0]["pair"].helper
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await to_draft_row(pilot, app)
        named = rf"draft model +{re.escape(Path(helper).name)}\b"  # the helper model's folder, by its name
        assert re.search(named, pane_text(screen.params_pane)) and "/" not in pane_text(screen.params_pane)
        await pilot.press("right")  # the helper model -> int4 self-draft
        assert screen.settings.self_draft == "int4"
        await wait_for(pilot, lambda: screen.building_draft is None)
        assert (await run_and_wait(pilot, app)).family.helper == "int4 self-draft"
        await pilot.press("left")  # back to the helper model
        assert screen.settings.self_draft is None and screen.settings.draft_layer is None
        assert re.search(named, pane_text(screen.params_pane))
        assert (await run_and_wait(pilot, app)).family.helper == helper
        assert calls == ["pair"] and errors(app) == []
