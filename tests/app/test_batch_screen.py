"""The batch screen (b, issue 39) on a tiny random model: it opens by its key, runs prompt lookup
beside autoregressive decoding at batch 1 and 2, and shows each sequence's progress, the table
rows, the plot of speedup against batch size with break-even and where each method stops paying;
a bad batch size or method is one line in the screen, what was typed kept; ctrl+s saves."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from decoders.bench.batch import BatchRow
from tests.support.app import make_app, wait_for
from tui_decode.screens.batch_screen import BatchScreen
from tui_decode.state.batch_plan import parse_sizes, project_prompts
from tui_decode.widgets.batch_views import batch_plot
from tui_decode.widgets.gamma_plot import GammaPlot

pytestmark = pytest.mark.anyio
SIZE = (140, 45)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def shown(screen, selector: str) -> str:
    widget = screen.query_one(selector)
    return "\n".join(line.text for line in widget.render_lines(widget.region.reset_offset))


async def open_batch(pilot, app) -> BatchScreen:
    await wait_for(pilot, lambda: app.main_screen.loaded is not None)
    await pilot.press("b")
    screen = app.screen
    assert isinstance(screen, BatchScreen)
    return screen


async def type_into(pilot, screen, selector: str, text: str) -> None:
    field = screen.query_one(selector, Input)
    field.value = text
    field.focus()
    await pilot.pause()


async def test_b_runs_each_method_beside_autoregressive_decoding_at_each_batch_size(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="pld", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_batch(pilot, app)
        assert screen.query_one("#batch-methods", Input).value == "pld"  # the chosen method, it runs batched
        await type_into(pilot, screen, "#batch-sizes", "2,1")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.running, timeout=120)
        await pilot.pause()
        assert screen.error is None and screen.report is not None
        assert [(r.method, r.batch) for r in screen.rows] == [("ar", 1), ("pld", 1), ("ar", 2), ("pld", 2)]
        table = shown(screen, "#batch-table")
        assert table.splitlines()[0].split()[:4] == ["method", "B", "speedup", "±"]
        for method, batch, speed in (("pld", "1", "x"), ("pld", "2", "x"), ("ar", "2", "baseline")):
            assert any(line.split()[:2] == [method, batch] and speed in line for line in table.splitlines()[1:])
        plot = screen.query_one("#batch-plot", GammaPlot)
        assert sorted(p.value for p in plot.data.points) == [0, 1] and plot.data.name == "B"  # log2 B
        drawn = shown(screen, "#batch-plot")
        assert "┈ break-even 1.0x" in drawn and "● pld" in drawn and "1.0" in drawn
        assert drawn.splitlines()[-1].split() == ["B", "1", "2"]
        assert shown(screen, "#batch-crossover").startswith("pld: ")
        # the last batch's two sequences, one line each, the selected one's text in full
        seqs = shown(screen, "#batch-seqs")
        assert "pld at B=2, round 2/2, 2 sequences (the project's prompts)" in seqs and "▸ seq  1" in seqs and "  seq  2" in seqs and "8/8 tokens" in seqs
        assert shown(screen, "#batch-text").startswith("seq 1: ")
        await pilot.press("down")
        assert "▸ seq  2" in shown(screen, "#batch-seqs") and shown(screen, "#batch-text").startswith("seq 2: ")
        assert str(screen.query_one("#batch-status").content).startswith("done: 4 rows measured")
        await pilot.press("ctrl+s")
        await pilot.pause()
        saved = sorted((tmp_path / "runs").glob("*-batch.*"))
        assert [p.suffix for p in saved] == [".csv", ".md"]
        assert len(saved[0].read_text(encoding="utf-8").splitlines()) == 5  # a header and four rows
        assert "## Speedup against batch size" in saved[1].read_text(encoding="utf-8")
        await pilot.press("escape")  # closes once done
        assert app.screen is app.main_screen
        assert not app.main_screen.running and not app.main_screen._decode_lock.locked()


async def test_escape_cancels_at_the_next_iteration_keeps_the_rows_and_frees_the_engine(tiny_spec, loader, tmp_path,
                                                                                        monkeypatch):
    """At 80x24 too: the table's columns uncut below the plot (the body scrolls)."""
    import time

    from decoders.backends.batched import BatchedLM

    real_step = BatchedLM.step

    def slow_step(self, new):
        time.sleep(0.03)
        return real_step(self, new)

    monkeypatch.setattr(BatchedLM, "step", slow_step)
    monkeypatch.setattr("decoders.bench.batch_surface.measure_surface",  # slow steps in the decoding only
                        lambda model, prompt, batches, **kw: ({b: [1.0] * 16 for b in batches}, 1.0))
    app = make_app(tiny_spec, loader, tmp_path, method="pld", max_new_tokens=16)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = await open_batch(pilot, app)
        await type_into(pilot, screen, "#batch-sizes", "1,2,4")
        await pilot.press("enter")
        assert screen.running and app.main_screen.running  # the main screen's keys wait
        assert all(field.disabled for field in screen.query(Input))
        await wait_for(pilot, lambda: len(screen.rows) >= 2, timeout=120)  # batch 1 measured
        await pilot.press("ctrl+r")  # no run while the batch holds the engine
        assert any("batch run is going" in n.message for n in app._notifications)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not screen.running, timeout=60)
        await pilot.pause()
        assert screen.cancelled and screen.report is None and 2 <= len(screen.rows) < 6
        assert str(screen.query_one("#batch-status").content).startswith("cancelled: ")
        assert shown(screen, "#batch-table").splitlines()[0].split() == \
            ["method", "B", "speedup", "±", "spread", "tok/s", "AR", "tok/s", "latency", "same"]
        assert not app.main_screen.running and not app.main_screen._decode_lock.locked()
        await pilot.press("ctrl+s")  # the rows so far, said to be cancelled
        await pilot.pause()
        markdown = next((tmp_path / "runs").glob("*-batch.md")).read_text(encoding="utf-8")
        assert "note: cancelled: the rows measured before escape" in markdown
        await pilot.press("escape")
        assert app.screen is app.main_screen


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A tiny main model with a tiny helper model: speculative decoding drafts batched with it."""
    from decoders.models.drafts import HelperModel
    from decoders.models.family import FamilySpec, load_family
    from tests.support.tiny import save_tiny_model

    root = tmp_path_factory.mktemp("batchpair")
    main = save_tiny_model(root / "main", vocab=64, layers=3)
    helper = save_tiny_model(root / "helper", vocab=64, layers=2, seed=1)
    spec = FamilySpec(name="pair", main=str(main), draft=HelperModel(source=str(helper)), device="cpu",
                      dtype="float32", label="tiny pair")
    return spec, load_family(spec)


async def test_a_family_with_a_helper_runs_spec_beside_prompt_lookup(pair, tmp_path):
    spec, family = pair
    app = make_app(spec, lambda s, progress: family, tmp_path, method="spec", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_batch(pilot, app)
        assert screen.query_one("#batch-methods", Input).value == "spec"  # the chosen method runs batched here
        await type_into(pilot, screen, "#batch-methods", "pld,spec")
        await type_into(pilot, screen, "#batch-sizes", "1,2")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.running, timeout=120)
        await pilot.pause()
        assert screen.error is None
        assert [(r.method, r.batch) for r in screen.rows] == [("ar", 1), ("pld", 1), ("spec", 1), ("ar", 2),
                                                             ("pld", 2), ("spec", 2)]
        assert all(r.identical for r in screen.rows)  # each sequence equals its batch-1 output
        drawn = shown(screen, "#batch-plot")
        assert "● pld" in drawn and "■ spec" in drawn
        assert shown(screen, "#batch-crossover").splitlines()[1].startswith("spec: ")


async def test_suffix_decoding_runs_at_batch_b_from_the_screen_its_k_the_panes(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="suffix", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_batch(pilot, app)
        assert screen.query_one("#batch-methods", Input).value == "suffix"  # the chosen method runs batched
        await type_into(pilot, screen, "#batch-sizes", "1,2")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.running, timeout=120)
        await pilot.pause()
        assert screen.error is None
        assert [(r.method, r.batch) for r in screen.rows] == [("ar", 1), ("suffix", 1), ("ar", 2), ("suffix", 2)]
        assert all(r.identical for r in screen.rows)
        assert screen.rows[-1].k == app.main_screen.settings.params.suffix_max != app.main_screen.settings.params.num_pred
        assert "▲ suffix" in shown(screen, "#batch-plot")


def test_the_screens_suffix_rows_read_the_sessions_memory_without_their_own_prompts_answers(tiny_family):
    from decoders.core.params import DecodeParams
    from decoders.methods.shared.suffix_memory import memory_for, prompt_key, reset_memories
    from tui_decode.state.batch_plan import suffix_shape

    reset_memories()
    try:
        prompts = [[1, 2, 3, 4], [5, 6, 7]]
        memory = memory_for(tiny_family)
        memory.add(prompt_key(prompts[0]), [9, 10, 11, 12])  # an earlier answer to the first row's prompt
        memory.add("another prompt", [20, 21, 22])
        shape = suffix_shape(tiny_family, DecodeParams(method="suffix", suffix_depth=8, suffix_factor=2.0), prompts)
        assert (shape.depth, shape.factor, shape.min_prob) == (8, 2.0, 0.1)
        assert shape.memory is not None and shape.memory.walk([9, 10]) is None
        assert shape.memory.walk([20, 21, 22]) is not None
        assert len(memory) == 2 and memory.depth == 24  # the session's memory as it was
        alone = suffix_shape(tiny_family, DecodeParams(method="suffix", suffix_source="request"), prompts)
        assert alone.memory is None
    finally:
        reset_memories()


@pytest.mark.parametrize("field,text,line", [
    ("#batch-sizes", "0,2", "batch sizes: each must be 1..64, got 0; give e.g. 1,2,4,8"),
    ("#batch-sizes", "1,65", "batch sizes: each must be 1..64, got 65; give e.g. 1,2,4,8"),
    ("#batch-sizes", "1,two", "batch sizes: give whole numbers 1..64 separated by commas, such as 1,2,4; got '1,two'"),
    ("#batch-methods", "jacobi", "methods: 'jacobi' does not decode at batch > 1 here; give pld, suffix, spec"),
])
async def test_bad_input_is_one_line_in_the_screen_and_keeps_what_was_typed(tiny_spec, loader, tmp_path, field,
                                                                            text, line):
    app = make_app(tiny_spec, loader, tmp_path, method="pld", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_batch(pilot, app)
        await type_into(pilot, screen, field, text)
        await pilot.press("enter")
        assert str(screen.query_one("#batch-error").content) == line
        assert not screen.running and screen.rows == [] and not app.main_screen.running
        assert screen.query_one(field, Input).value == text  # nothing lost


async def test_spec_without_a_draft_that_runs_batched_is_refused_in_one_line(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="spec", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        screen = await open_batch(pilot, app)
        assert screen.query_one("#batch-methods", Input).value == "pld"  # spec cannot run batched here
        await type_into(pilot, screen, "#batch-methods", "pld,spec")
        await pilot.press("enter")
        assert str(screen.query_one("#batch-error").content) == (
            "methods: spec cannot run at batch > 1 on this family: spec drafts at batch > 1 with a helper model, "
            "the int4 self-draft or a trained head only; choose the int4 or head draft in the parameters pane, or a "
            "family with a helper (f)")
        assert not screen.running


async def test_the_palette_and_the_help_offer_the_batch_screen(tiny_spec, loader, tmp_path):
    from tui_decode.state.help_text import KEYS

    assert any(key == "b" and "batch" in text for key, text in KEYS)
    app = make_app(tiny_spec, loader, tmp_path, method="pld", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Batch sizes")
        command.callback()
        await pilot.pause()
        assert isinstance(app.screen, BatchScreen)


async def test_b_waits_for_a_model(tiny_spec, loader, tmp_path):
    app = make_app(None, loader, tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("b")
        assert app.screen is app.main_screen
        assert any("No model is loaded yet" in n.message for n in app._notifications)


def test_the_prompts_are_the_projects_own_each_once():
    prompts = project_prompts(128)
    assert len(prompts) == len(set(prompts)) == 128
    from decoders.bench.prompts import load_prompts

    bench = {p.text for path in sorted(ROOT.glob("bench/*.jsonl")) for p in load_prompts(path)}
    assert bench and not set(prompts) & bench  # none of the bench's Spec-Bench prompts


def test_sizes_are_sorted_and_bounded():
    assert parse_sizes(" 4, 1,2,2") == [1, 2, 4]
    with pytest.raises(Exception, match="at most 6"):
        parse_sizes("1,2,3,4,5,6,7")


def test_the_plot_gives_each_method_its_glyph_and_leaves_the_baseline_as_break_even():
    def row(method: str, batch: int, speedup: float) -> BatchRow:
        return BatchRow(method=method, batch=batch, throughput=1.0, latency_s=1.0, ar_throughput=1.0,
                        speedup=speedup, spread=0.1, forwards=1, accepted_per_forward=1.0, identical=True)

    data = batch_plot([row("ar", 1, 1.0), row("pld", 1, 1.3), row("spec", 1, 1.6), row("pld", 4, 0.8),
                       row("suffix", 1, 1.1)])
    assert [(p.value, p.speedup, p.glyph) for p in data.points] == [(0, 1.3, "●"), (0, 1.6, "■"), (2, 0.8, "●"),
                                                                     (0, 1.1, "▲")]
    assert data.series == (("●", "pld"), ("■", "spec"), ("▲", "suffix"))
    assert data.ticks == ((0, "1"), (2, "4"))  # log2 of the batch size, each measured size labelled


def test_the_prompt_shown_is_the_first_sequence_and_the_others_fit_the_room(tiny_family):
    from decoders.core.errors import DecodeError
    from tests.support.app import PROMPT
    from tui_decode.state.batch_plan import prompt_ids

    ids = prompt_ids(tiny_family, PROMPT, False, 4, 40)
    assert ids[0] == tiny_family.encode_prompt(PROMPT, False) and len(ids) == 4
    assert all(0 < len(i) <= 40 for i in ids[1:]) and len({tuple(i) for i in ids}) == 4
    with pytest.raises(DecodeError, match=r"^the prompt \(\d+ tokens\) leaves no room"):
        prompt_ids(tiny_family, PROMPT, False, 4, 3)


def test_the_batch_screen_offers_spec_on_llama_cpp_with_a_gguf_helper_only():
    from decoders.models.drafts import Int4
    from tui_decode.state.batch_plan import family_methods
    from tui_decode.state.settings import Settings

    assert family_methods(Settings(), "llamacpp", has_helper=True) == {"pld": None, "suffix": None, "spec": None}
    for settings, helper in ((Settings(), False), (Settings(draft=Int4()), True)):
        assert family_methods(settings, "llamacpp", has_helper=helper)["spec"] == (
            "spec drafts at batch > 1 on llama.cpp with a GGUF helper only; pick a family with a GGUF helper (f) or "
            "leave spec out")
    assert family_methods(Settings(), "torch", has_helper=True)["spec"] is None
