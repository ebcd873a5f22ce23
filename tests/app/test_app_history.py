"""The run history and the side-by-side comparison, on the tiny random model: h then enter
compares the last two runs, c compares the run with its baseline, saved runs are listed; and
ctrl+s saves a screenshot of the very run it saves."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

from decoders.analysis.summary import first_divergence
from decoders.models.families import BUILTIN_FAMILIES
from decoders.records.run import RunResult
from tests.support.app import DATA, PROMPT, SIZE, PacedEngine, make_app, run_and_wait, wait_for
from tui_decode.app import TuiDecodeApp
from tui_decode.screens import CompareScreen, HistoryScreen
from tui_decode.state.run_history import RunHistory, Stream, row_cells
from tui_decode.state.token_text import real_text
from tui_decode.widgets.aligned_stream import aligned_lines

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def shown(run) -> list[str]:
    return [real_text(t).replace("\n", "↵") for t in run.tokens]


def svg_text(svg: str) -> str:
    """The text of an SVG screenshot, one line per screen row."""
    rows: dict[float, list[str]] = {}
    for match in re.finditer(r'<text[^>]*?y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(match.group(1)), []).append(html.unescape(re.sub("<[^>]+>", "", match.group(2))))
    return "\n".join("".join(parts) for _, parts in sorted(rows.items())).replace("\xa0", " ")


def line_texts(side) -> list[str]:
    return [side.render_line(y).text for y in range(side.scrollable_content_region.height)]


# -- the model, without the app ----------------------------------------------------------------------
def test_lines_hold_the_same_positions_on_both_sides_and_fit():
    left = [" the", " quick", " brown", " fox"]
    right = [" a", " very", " very", " long", " tail", " end"]
    lines = aligned_lines(left, right, width=12)
    assert lines == [(0, 2), (2, 4), (4, 6)]  # " a very very" would not fit beside " the quick brown"
    assert aligned_lines(left, right, width=80, split_at=2) == [(0, 2), (2, 6)]


def test_history_lists_runs_newest_first_each_baseline_once(tmp_path):
    spec, ar = RunResult.load(DATA / "run_spec.json"), RunResult.load(DATA / "run_ar.json")
    history = RunHistory()
    history.record(spec)
    history.record(ar)
    history.record(spec)  # the same run twice is one entry
    rows = [(s.entry.number, s.role) for s in history.streams()]
    same = spec.prompt_ids == ar.prompt_ids and spec.baseline.ids == ar.baseline.ids
    assert rows == ([(2, "method"), (2, "baseline"), (1, "method")] if same else
                    [(2, "method"), (2, "baseline"), (1, "method"), (1, "baseline")])
    cells = row_cells(Stream(history.entries[0], "method"))
    assert cells[7] == spec.method.label and cells[5] == str(spec.summary.tokens)
    assert cells[3] == f"{spec.summary.tau:.2f}" and cells[6] == "yes"
    assert cells[8] == "max 32"
    assert row_cells(Stream(history.entries[0], "baseline"))[2] == "1.00x ref"


def test_saved_runs_join_the_history_unless_already_there_and_bad_files_are_named(tmp_path):
    shutil.copy(DATA / "run_spec.json", tmp_path / "a.json")
    shutil.copy(DATA / "run_pld.json", tmp_path / "b.json")
    (tmp_path / "broken.json").write_text("{not json")
    history = RunHistory()
    history.mark_saved(RunResult.load(tmp_path / "a.json"), tmp_path / "a.json")  # saved this session
    problems = history.load_saved(tmp_path)
    assert len(problems) == 1 and "broken.json" in problems[0]
    assert [(e.source, e.path.name) for e in history.entries] == [("run", "a.json"), ("saved", "b.json")]
    history.load_saved(tmp_path)  # listing again adds nothing
    assert len(history.entries) == 2


def test_a_saved_run_deleted_since_the_history_last_looked_is_listed_no_more(tmp_path):
    """Issue 40: the history kept listing a file deleted after it had been read."""
    shutil.copy(DATA / "run_spec.json", tmp_path / "a.json")
    shutil.copy(DATA / "run_pld.json", tmp_path / "b.json")
    history = RunHistory()
    history.load_saved(tmp_path)
    (tmp_path / "a.json").unlink()
    history.load_saved(tmp_path)
    assert [(e.source, e.path.name) for e in history.entries] == [("saved", "b.json")]


def test_a_saved_run_whose_token_texts_disagree_with_its_ids_is_compared_by_its_ids(tmp_path):
    """Issue 40: the history's compare showed a saved file's ``tokens`` as they were, though its
    ids (and its iterations) said otherwise; the ids are the record, and one line says so."""
    import json

    from tui_decode.state.run_history import stream_tokens

    data = json.loads((DATA / "run_spec.json").read_text())
    data["runs"]["method"]["tokens"][1] = " slow"
    (tmp_path / "edited.json").write_text(json.dumps(data))
    shutil.copy(DATA / "run_pld.json", tmp_path / "fine.json")
    history = RunHistory()
    assert history.load_saved(tmp_path) == []
    assert len(history.text_notes) == 1 and history.text_notes[0].startswith(
        "edited.json: 1 token id(s) have two texts in the file (id 2365: ' slow' and ' quick')"), history.text_notes
    edited = next(e.result for e in history.entries if e.path.name == "edited.json")
    assert [t for t, _, _ in stream_tokens(edited.method)][:3] == ["The", "<id 2365>", " brown"]
    history.load_saved(tmp_path)  # read once: said once
    assert history.text_notes == []


def test_the_history_reads_saved_runs_newest_first_up_to_a_byte_budget(tmp_path):
    import os

    for n, name in enumerate(("run_ar.json", "run_pld.json", "run_jacobi.json")):  # newest last
        shutil.copy(DATA / name, tmp_path / name)
        os.utime(tmp_path / name, (1000 + n, 1000 + n))
    history = RunHistory()
    history.load_saved(tmp_path, budget=(DATA / "run_jacobi.json").stat().st_size + 100)
    assert [e.path.name for e in history.entries] == ["run_jacobi.json"]
    history.load_saved(tmp_path, limit=2)
    assert [e.path.name for e in history.entries] == ["run_jacobi.json", "run_pld.json"]


# -- the app --------------------------------------------------------------------------------------
async def test_h_then_enter_compares_the_last_two_runs_side_by_side(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="spec", max_new_tokens=16)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        first = await run_and_wait(pilot, app)
        await pilot.press("g")  # sampling: the random tiny model parts from the greedy run at once
        second = await run_and_wait(pilot, app)
        app.main_screen.params_pane.focus()

        await pilot.press("h", "enter")  # two keystrokes from the main screen
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        at = first_divergence(first.method.ids, second.method.ids)
        assert at is not None and screen.comparison.divergence == at
        assert screen.left.texts == shown(first.method) and screen.right.texts == shown(second.method)
        assert screen.left.kinds == first.method.kinds and screen.right.kinds == second.method.kinds
        assert "#1" in str(screen.left.border_title) and "#2" in str(screen.right.border_title)
        heading = str(screen.heading.visual)
        assert (f"part at token {at}" in heading or f"first {at} tokens" in heading if at else
                "they part at the first token" in heading), heading
        # the line where they part starts at the divergence and is marked on both sides
        line = screen.left.line_of(at) if at < len(screen.left.texts) else screen.right.line_of(at)
        assert screen.left._spans[line][0] == at == screen.right._spans[line][0]
        for side in (screen.left, screen.right):
            marked = [text for text in line_texts(side) if "≠" in text]
            assert len(marked) == 1 and marked[0].lstrip().startswith(f"{at}≠")
        # each line holds the same token positions on both sides
        assert screen.left._spans == screen.right._spans
        n = min(len(first.method.ids), len(second.method.ids))
        for start, end in screen.left._spans:
            if end <= n:
                assert screen.left.line_text(screen.left._spans.index((start, end))) == "".join(
                    shown(first.method)[start:end])

        await pilot.press("escape")
        assert isinstance(app.screen, HistoryScreen)
        await pilot.press("escape")
        assert app.screen is app.main_screen


async def test_x_in_the_history_exports_it_as_markdown_and_csv_one_row_a_run(tiny_spec, loader, tmp_path):
    """Like the sweep's table and the comparison, the history goes elsewhere: x writes it (the
    figures of `tui_decode.state.exports`, after the run's number, source, method and parameters)."""
    import csv

    from tui_decode.state.exports import COLUMNS, summary_cells

    app = make_app(tiny_spec, loader, tmp_path, method="spec", max_new_tokens=16)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        first = await run_and_wait(pilot, app)
        await pilot.press("m")  # prompt lookup
        app.main_screen.prompt_pane.text = PROMPT + " | a pipe, and\na new line"
        second = await run_and_wait(pilot, app)
        app.main_screen.params_pane.focus()
        await pilot.press("h", "x")
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)  # it stays open
        exported = sorted((tmp_path / "runs").glob("*-history.*"))
        assert [p.suffix for p in exported] == [".csv", ".md"]
        assert any(f"Exported {exported[1].name}" in n.message for n in app._notifications)

    rows = list(csv.reader(exported[0].read_text(encoding="utf-8").splitlines()))
    assert rows[0] == ["run", "from", "method", "params", "prompt", *COLUMNS]
    assert [row[:3] for row in rows[1:]] == [["2", "session", second.method.label], ["1", "session", first.method.label]]
    assert rows[1][5:] == summary_cells(second.summary) and rows[2][5:] == summary_cells(first.summary)
    assert rows[1][4].endswith("| a pipe, and a new line") and "γ=4" in rows[2][3] and "max 16" in rows[2][3]
    md = exported[1].read_text(encoding="utf-8").splitlines()
    assert md[0] == "# Run history" and md[2].startswith("| run | from | method | params | prompt | speedup |")
    table = [line for line in md if line.startswith("| 2 |") or line.startswith("| 1 |")]
    assert len(table) == 2 and "\\| a pipe, and a new line |" in table[0]  # one line a run, its pipe escaped
    assert table[1].count(" | ") == md[2].count(" | ")


async def test_c_compares_the_run_with_its_own_baseline(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="pld", max_new_tokens=16)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("c", "h")
        assert any("No run to compare" in n.message for n in app._notifications)
        assert any("No runs yet" in n.message for n in app._notifications) and app.screen is app.main_screen
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        result = await run_and_wait(pilot, app)
        app.main_screen.params_pane.focus()
        await pilot.press("c")  # one keystroke
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.left.texts == shown(result.baseline) and set(screen.left.kinds) == {"ar"}
        assert screen.right.texts == shown(result.method)
        assert result.summary.identical and screen.comparison.divergence is None
        assert "identical" in str(screen.heading.visual)
        assert not any("≠" in text for text in line_texts(screen.left))
        await pilot.press("ctrl+s")  # the screenshot would be of this screen, not of the run saved
        assert not (tmp_path / "runs").exists()
        assert any("Close this screen first" in n.message for n in app._notifications)


async def test_history_space_marks_and_enter_compares_the_marked_pair(tiny_spec, loader, tmp_path):
    shutil.copytree(DATA, tmp_path / "runs", ignore=shutil.ignore_patterns("run_ar.json", "run_pld.json"))
    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        result = await run_and_wait(pilot, app)
        app.main_screen.params_pane.focus()
        await pilot.press("h")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        # this run and its baseline, then the two saved runs of the folder (each with its baseline)
        sources = [(s.entry.source, s.role) for s in screen.streams]
        assert sources[:2] == [("run", "method"), ("run", "baseline")]
        assert sorted(s.entry.path.name for s in screen.streams if s.entry.source == "saved" and s.role == "method") \
            == ["run_jacobi.json", "run_spec.json"]
        assert [s.key for s in screen.marked] == [(1, "baseline"), (1, "method")]  # one run: it and its baseline
        # unmark both, mark a saved run's method row and this run's row, compare
        for s in list(screen.marked):
            screen.marked.remove(s)
        saved_row = next(i for i, s in enumerate(screen.streams) if s.entry.source == "saved" and s.role == "method")
        screen.table.move_cursor(row=saved_row)
        await pilot.press("space")
        screen.table.move_cursor(row=0)
        await pilot.press("space", "enter")
        await pilot.pause()
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        saved = screen.streams[saved_row].run
        assert compare.left.texts == shown(saved) and compare.right.texts == shown(result.method)


async def test_ctrl_s_mid_run_saves_nothing_and_says_why(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, engine_factory=PacedEngine, method="ar", max_new_tokens=40)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        PacedEngine.pause = 0.0
        try:
            await run_and_wait(pilot, app)
        finally:
            PacedEngine.pause = 0.03
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.main_screen.table.row_count >= 2 and app.main_screen.running)
        await pilot.press("ctrl+s")  # the screen shows the new run; the last result is the old one
        await pilot.pause()
        assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())
        assert any("save once it ends" in n.message for n in app._notifications)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.main_screen.running)


async def test_the_saved_screenshot_shows_the_saved_runs_prompt_not_the_one_edited_since(tiny_spec, loader, tmp_path):
    app = make_app(tiny_spec, loader, tmp_path, method="spec", max_new_tokens=8)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.main_screen.loaded is not None)
        result = await run_and_wait(pilot, app)
        app.main_screen.prompt_pane.text = "Zanzibar"  # the next run's prompt, typed after the run
        await pilot.press("right_square_bracket")  # and its gamma, 4 -> 5
        await pilot.press("ctrl+s")
        for _ in range(5):
            await pilot.pause()
        saved = sorted((tmp_path / "runs").iterdir())
        assert [p.suffix for p in saved] == [".json", ".svg"]
        svg = svg_text(saved[1].read_text())
        assert RunResult.load(saved[0]).prompt == PROMPT == result.prompt and result.params["gamma"] == 4
        assert "Zanzibar" not in svg and "w12 w20 w21" in svg, svg
        assert re.search(r"γ draft length\s*4\b", svg), svg
        # the user's edits are back
        assert app.main_screen.prompt_pane.text == "Zanzibar" and app.main_screen.settings.params.gamma == 5


def test_compare_screen_snapshot(snap_compare):
    """c on an opened prompt-lookup run: its baseline beside it, line for line."""
    app = TuiDecodeApp(BUILTIN_FAMILIES["smollm2-135m"], opened=RunResult.load(DATA / "run_pld.json"),
                       opened_name="run_pld.json", runs_folder=Path("/nonexistent/runs"), cursor_blink=False)
    assert snap_compare(app, press=["c"], terminal_size=(120, 36))


def test_history_screen_snapshot(snap_compare):
    """h on an opened run: the run and its baseline, both marked."""
    app = TuiDecodeApp(BUILTIN_FAMILIES["smollm2-135m"], opened=RunResult.load(DATA / "run_spec.json"),
                       opened_name="run_spec.json", runs_folder=Path("/nonexistent/runs"), cursor_blink=False)
    assert snap_compare(app, press=["h"], terminal_size=(120, 36))


async def test_the_history_shows_the_speedup_the_status_line_gives_under_a_label_naming_it():
    """The status line and the explanation judge a run by its decode speedup; the history's speedup
    column is that figure with its spread (not the end-to-end one), and says so."""
    from tui_decode.widgets.stats_pane import headline_speed, speed_text

    result = RunResult.load(DATA / "run_spec.json")
    s = result.summary
    s.speedup_wall, s.speedup_decode, s.speedup_spread = 1.09, 1.0, 0.33  # the trial's spec run
    app = TuiDecodeApp(BUILTIN_FAMILIES["smollm2-135m"], opened=result, opened_name="run_spec.json",
                       runs_folder=Path("/nonexistent/runs"), cursor_blink=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        assert speed_text(headline_speed(s), s.speedup_spread)[0] == "no measurable difference (1.00x +/- 0.33)"
        await pilot.press("h")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        labels = [str(c.label) for c in screen.table.columns.values()]
        assert "decode speedup ±" in labels
        column = labels.index("decode speedup ±")
        assert str(screen.table.get_row_at(0)[column]) == "1.00x ±0.33"
        assert str(screen.table.get_row_at(1)[column]) == "1.00x ref"  # its baseline
    s.speedup_decode = None  # too few tokens for a decode rate: the end-to-end figure, marked
    assert row_cells(Stream(RunHistory().record(result), "method"))[2] == "1.09x ±0.33 e2e"


async def test_the_history_at_80_columns_shows_the_figures_before_the_label_and_saved_runs_by_time(tmp_path):
    """At 80 columns the speedup, tau and acceptance are in view (the long label comes after them),
    and a saved run's `from` reads when it was saved, not "20261201-19…" for every file."""
    import datetime

    stamped = tmp_path / f"{datetime.date.today():%Y%m%d}-193512-spec.json"
    shutil.copy(DATA / "run_spec.json", stamped)
    result = RunResult.load(stamped)
    app = TuiDecodeApp(BUILTIN_FAMILIES["smollm2-135m"], opened=result, opened_name=stamped.name,
                       runs_folder=tmp_path, cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        lines = [strip.text for strip in screen._compositor.render_strips()]
        row = next((line for line in lines if "19:35" in line and "ref" not in line), "")  # the run, not its baseline
        assert row, "\n".join(lines)
        s = result.summary
        for cell in (f"{s.tau:.2f}", f"{headline_speed_of(result)}", f"{s.accept_rate:.0%}"):
            assert cell in row, row
        assert f"{datetime.date.today():%Y%m%d}-19…" not in "\n".join(lines)
        assert "its baseline, x exports the table" in " ".join(line.strip("│ ") for line in lines)  # wrapped, not cut

    from tui_decode.state.run_history import saved_at

    named = tmp_path / "20261201-193512-spec.json"
    assert saved_at(named, today=datetime.date(2026, 12, 1)) == "19:35"
    assert saved_at(named, today=datetime.date(2026, 12, 2)) == "12-01 19:35"
    assert saved_at(tmp_path / "mine.json") is None


def headline_speed_of(result) -> str:
    from tui_decode.state.run_history import speedup_text

    return speedup_text(result)


def with_prompt(result: RunResult, prompt_ids: list[int]) -> RunResult:
    import msgspec.structs

    return msgspec.structs.replace(result, prompt_ids=prompt_ids)


def test_a_comparison_of_two_prompts_says_so_and_compares_no_tokens():
    """Two runs of different prompts were compared silently: "the same first 0 tokens, then they
    part at token 0"; their tokens continue different texts."""
    from tui_decode.state.run_history import Comparison

    result = RunResult.load(DATA / "run_spec.json")
    history = RunHistory()
    a = history.record(result)
    b = history.record(with_prompt(result, [*result.prompt_ids, 7]))
    other = Comparison(Stream(a, "method"), Stream(b, "baseline"))
    assert not other.same_prompt
    n = len(result.prompt_ids)
    assert other.summary().startswith(f"different prompts ({n} and {n + 1} tokens): side by side, not compared"), \
        other.summary()
    assert "the same first" not in other.summary()
    same = Comparison(Stream(a, "baseline"), Stream(a, "method"))
    assert same.same_prompt and "different prompts" not in same.summary()


async def test_the_compare_screen_marks_no_divergence_between_two_prompts(tmp_path):
    from tui_decode.state.run_history import Comparison

    result = RunResult.load(DATA / "run_spec.json")
    history = RunHistory()
    a = history.record(result)
    b = history.record(with_prompt(result, [*result.prompt_ids, 7]))
    app = TuiDecodeApp(None, opened=result, opened_name="run_spec.json", runs_folder=tmp_path, cursor_blink=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        await app.push_screen(CompareScreen(Comparison(Stream(a, "method"), Stream(b, "baseline"))))
        await pilot.pause()
        heading = "".join(strip.text for strip in app.screen.heading.render_lines(app.screen.heading.region))
        assert "different prompts" in heading, heading
        await pilot.press("j")
        await pilot.pause()
        assert any("different prompts" in n.message for n in app._notifications)


async def test_a_run_opened_from_the_runs_folder_is_listed_once(tmp_path, monkeypatch):
    """`tui-decode --open RUNS/…-spec.json` recorded the run under its bare file name, so h listed
    it twice: once opened, once again as a saved file of the runs folder."""
    from tui_decode import app as app_module
    from tui_decode.cli.main import build_parser, cmd_app

    runs = tmp_path / "runs"
    runs.mkdir()
    path = runs / "20261201-193512-spec.json"
    shutil.copy(DATA / "run_spec.json", path)
    monkeypatch.setenv("TUI_DECODE_RUNS_DIR", str(runs))
    made = {}
    monkeypatch.setattr(app_module.TuiDecodeApp, "run", lambda self: made.setdefault("app", self) and 0)
    monkeypatch.chdir(tmp_path)  # not the runs folder: the bare name names no file here
    assert cmd_app(build_parser().parse_args(["--open", str(path)])) == 0
    app = made["app"]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("h")
        await pilot.pause()
        assert isinstance(app.screen, HistoryScreen)
        runs_listed = [stream for stream in app.screen.streams if stream.role == "method"]
        assert len(runs_listed) == 1, [row_cells(stream) for stream in runs_listed]
        assert runs_listed[0].entry.source == "opened"
