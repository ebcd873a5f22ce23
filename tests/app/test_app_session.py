"""The app's rules that need no terminal: how keys step parameters, how tokens are turned back into
text, how worker events are batched, where runs go, and that importing the app loads no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from decoders.core.declarations import TOKEN_LADDER
from decoders.core.params import METHODS, DecodeParams
from decoders.models.drafts import EarlyExit
from decoders.records.run import RunResult
from tui_decode.state.batching import Batcher
from tui_decode.state.live_run import live_figures
from tui_decode.state.runs_folder import RUNS_DIR_ENV, run_file_stem, runs_dir, saved_runs
from tui_decode.state.settings import KNOB_BY_KEY, Settings, default_draft_layer, knobs_for
from tui_decode.state.token_text import real_text, run_tokens

DATA = Path(__file__).parents[1] / "data"


def step(key: str, settings: Settings, direction: int = 1, draft_layers: int = 0) -> Settings:
    return KNOB_BY_KEY[key].step(settings, direction, draft_layers)


def test_method_cycles_through_every_method_and_back():
    settings = Settings(DecodeParams(method="ar"))
    seen = []
    for _ in METHODS:
        seen.append(settings.params.method)
        settings = step("method", settings)
    assert seen == list(METHODS) and settings.params.method == "ar"


def test_numbers_stay_in_range():
    settings = Settings(DecodeParams(gamma=1, temperature=0.1))
    assert step("gamma", settings, -1).params.gamma == 1
    assert step("temperature", settings, -1).params.temperature == pytest.approx(0.1)
    assert step("temperature", settings, 1).params.temperature == pytest.approx(0.2)
    assert step("gamma", Settings(DecodeParams(gamma=16)), 1).params.gamma == 16


def test_max_tokens_moves_along_the_ladder_from_any_value():
    assert step("max_new_tokens", Settings(DecodeParams(max_new_tokens=40))).params.max_new_tokens == 48
    assert step("max_new_tokens", Settings(DecodeParams(max_new_tokens=40)), -1).params.max_new_tokens == 32
    top = Settings(DecodeParams(max_new_tokens=TOKEN_LADDER[-1]))
    assert step("max_new_tokens", top).params.max_new_tokens == TOKEN_LADDER[-1]


def test_ngram_bounds_may_cross_so_the_engine_can_say_why_that_is_wrong():
    settings = Settings(DecodeParams(method="pld", ngram_min=3, ngram_max=3))
    crossed = step("ngram_min", settings)
    assert crossed.params.ngram_min == 4
    with pytest.raises(Exception, match="ngram_min \\(4\\) is larger than ngram_max \\(3\\)"):
        crossed.params.validated()


def test_draft_layer_starts_two_thirds_up_and_stays_inside_the_stack():
    assert default_draft_layer(30) == 20
    assert default_draft_layer(2) == 1
    none_yet = Settings(draft=None)
    assert step("draft_layer", none_yet, 1, draft_layers=30).draft_layer == 20
    assert step("draft_layer", Settings(draft=EarlyExit(layer=29)), 1, draft_layers=30).draft_layer == 29
    assert step("draft_layer", Settings(draft=EarlyExit(layer=1)), -1, draft_layers=30).draft_layer == 1
    # a family with its own helper model has no layer to choose
    assert step("draft_layer", Settings(draft=None), 1, draft_layers=0).draft_layer is None


def test_each_method_shows_its_own_rows():
    keys = {method: [k.key for k in knobs_for(method)] for method in METHODS}
    assert "gamma" in keys["spec"] and "gamma" not in keys["pld"]
    assert {"num_pred", "ngram_max", "ngram_min"} <= set(keys["pld"])
    assert {"block", "init"} <= set(keys["jacobi"])
    assert keys["ar"] == ["method", "mode", "temperature", "seed", "max_new_tokens"]


@pytest.mark.parametrize("shown,real", [
    ("↵", "\n"),
    ("↵↵", "\n\n"),
    ("·", " "),
    ("··", "  "),
    ("↵··", "\n  "),
    (" the", " the"),
    ("a·b", "a·b"),  # a real middle dot inside a word stays
    ("→", "→"),
])
def test_real_text_undoes_the_display_markers(shown, real):
    assert real_text(shown) == real


def test_batcher_hands_over_at_most_once_per_interval():
    now = [0.0]
    delivered: list[list[int]] = []
    batcher = Batcher(delivered.append, interval=0.04, clock=lambda: now[0])
    for i in range(10):  # ten events within 10 ms: one batch at the end
        now[0] += 0.001
        batcher.add(i)
    assert delivered == []
    now[0] += 0.05
    batcher.add(10)
    assert delivered == [list(range(11))]
    batcher.add(11)
    batcher.flush()
    assert delivered[-1] == [11]
    batcher.flush()  # nothing pending: nothing delivered
    assert len(delivered) == 2


def test_batcher_hands_over_the_last_event_before_a_silence_once_its_interval_passed():
    """A load step reported right after another, then seconds of work: its line waited for the
    next report (the status line showed the step before it all along)."""
    now = [0.0]
    delivered: list[list[str]] = []
    batcher = Batcher(delivered.append, interval=0.04, clock=lambda: now[0])
    batcher.add("quantizing")  # at once after the batcher's start: held
    batcher.flush_due()
    assert delivered == []
    now[0] += 0.05  # the waiting worker polls
    batcher.flush_due()
    assert delivered == [["quantizing"]]
    now[0] += 0.05
    batcher.flush_due()  # nothing new: nothing handed over
    assert delivered == [["quantizing"]]


def test_live_figures_of_a_recorded_run_match_its_summary():
    result = RunResult.load(DATA / "run_pld.json")
    figures = live_figures(result.method.iters)
    assert figures["tokens"] == result.summary.tokens
    assert figures["iterations"] == result.summary.iterations
    assert figures["accepted"] == result.summary.accepted
    assert figures["accept_rate"] == result.summary.accept_rate


def test_run_tokens_rebuild_the_text():
    result = RunResult.load(DATA / "run_ar.json")
    tokens = run_tokens(result.method)
    assert "".join(text for text, _, _ in tokens) == result.method.text
    assert [k for _, k, _ in tokens] == result.method.kinds


def test_runs_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(RUNS_DIR_ENV, str(tmp_path / "mine"))
    assert runs_dir() == tmp_path / "mine"
    monkeypatch.delenv(RUNS_DIR_ENV)
    assert runs_dir().name == "runs" and "tui-decode" in str(runs_dir())


def test_run_file_names_never_overwrite(tmp_path):
    result = RunResult.load(DATA / "run_pld.json")
    first = run_file_stem(result, tmp_path, now=0)
    assert first.endswith("-pld")
    (tmp_path / f"{first}.json").write_text("{}")
    second = run_file_stem(result, tmp_path, now=0)
    assert second == f"{first}-2"


def test_saved_runs_newest_first(tmp_path):
    import os

    for n, name in enumerate(["a.json", "b.json", "c.json"]):
        path = tmp_path / name
        path.write_text("{}")
        os.utime(path, (1000 + n, 1000 + n))
    (tmp_path / "notes.txt").write_text("")
    assert [p.name for p in saved_runs(tmp_path)] == ["c.json", "b.json", "a.json"]
    assert saved_runs(tmp_path / "missing") == []


def test_importing_the_app_loads_neither_torch_nor_transformers():
    """The first frame must not wait for the heavy libraries."""
    code = ("import sys, tui_decode.app, tui_decode.cli.main; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_registered_method_brings_its_own_knobs():
    """The pane's rows come from the declarations: a new method's parameter is a row, stepped
    within its range, and [ ] change the parameter it names as its draft length."""
    from decoders.core.declarations import Method, ParamSpec, register, unregister
    from tui_decode.state.settings import draft_length_key

    span = ParamSpec("span_test", "s span", "Toy: tokens looked back", 3, low=1, high=5)
    register(Method(name="toy", label="Toy", run=lambda ctx: iter(()), params=(span,), draft_length="span_test"))
    try:
        rows = knobs_for("toy")
        assert [k.key for k in rows][-1] == "span_test" and "draft_layer" not in [k.key for k in rows]
        assert rows[-1].label == "s span" and rows[-1].hint == "tokens looked back"
        assert draft_length_key("toy") == "span_test" and draft_length_key("ar") is None
        settings = Settings(DecodeParams(method="toy", span_test=5))
        assert rows[-1].step(settings, 1).params.span_test == 5
        assert rows[-1].step(settings, -1).params.span_test == 4
        assert step("method", Settings(DecodeParams(method="jacobi"))).params.method == "toy"
    finally:
        unregister("toy")


def test_the_history_names_each_draft_length_by_its_declared_symbol():
    """The history's parameters column: the draft length under the symbol its `ParamSpec` declares."""
    from tui_decode.state.run_history import key_params

    for method, name, symbol in (("spec", "gamma", "γ"), ("pld", "num_pred", "k"), ("jacobi", "block", "m")):
        result = RunResult.load(DATA / f"run_{method}.json")
        assert f"{symbol}={result.params[name]}" in key_params(result, full=True).split(" · "), method
    assert "=" not in key_params(RunResult.load(DATA / "run_ar.json"), full=True)  # no draft length


def test_quiet_points_hand_batches_over_as_often_before_either_run():
    """The decode worker's idle hook: a due batch goes out at the engine's quiet points, as often
    before the method's step as before the baseline's (the step after a hand-over runs cold),
    whichever kind of point the interval happens to end at."""
    from tui_decode.workers.decode import QuietPoints

    now = [0.0]
    delivered: list[list] = []
    batch = Batcher(delivered.append, interval=0.04, clock=lambda: now[0])
    batch.auto = False
    quiet = QuietPoints(batch)
    # the method's points span three steps to the baseline's one: the interval mostly ends there
    for k in range(400):
        batch.add(k)
        now[0] += 0.03
        quiet("method")
        now[0] += 0.01
        quiet("baseline")
    assert len(delivered) > 50 and sum(len(d) for d in delivered) <= 400
    assert abs(quiet.counts["method"] - quiet.counts["baseline"]) <= 1
    batch.add("x")
    assert delivered[-1][-1] != "x"  # auto off: add alone never hands over
