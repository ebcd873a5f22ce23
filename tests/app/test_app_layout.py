"""The app fits any terminal: pages on tabs below 120 columns, room for the detail and the drafts
at 200; a footer whose keys read apart at every width; token colours that mean one thing each;
the iteration detail's bonus position told right. No model is loaded (a saved run is opened)."""

from __future__ import annotations

from pathlib import Path

import msgspec.structs
import pytest
from rich.style import Style

from decoders.records.run import Emitted, RunResult
from tests.support.app import wait_for
from tui_decode.app import TuiDecodeApp
from tui_decode.screens.main.layout import layout_for
from tui_decode.widgets import stats_pane
from tui_decode.widgets.details import DetailContext, view_for

pytestmark = pytest.mark.anyio

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def opened(method: str = "spec") -> TuiDecodeApp:
    return TuiDecodeApp(None, opened=RunResult.load(DATA / f"run_{method}.json"), opened_name=f"run_{method}.json",
                        runs_folder=Path("/nonexistent/runs"), cursor_blink=False)


def screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def shown(widget) -> bool:
    return widget.display and widget.region.area > 0


def footer_laid_out(app) -> bool:
    """The footer shows the keys of what has focus now, each placed, on the screen's last line. On a
    cold start they arrive in stages (the screen's keys, then the focused pane's, a refresh each)."""
    from textual.widgets._footer import FooterKey

    from tui_decode.widgets.app_footer import NARROW_HIDDEN, hidden_at

    footer = app.main_screen.footer
    hidden = NARROW_HIDDEN if footer.narrow else hidden_at(app.size.width)
    wanted = {binding.action for _, binding, _, _ in app.screen.active_bindings.values()
              if binding.show and binding.action not in hidden}
    keys = list(footer.query(FooterKey))
    return (app.focused is not None and footer._bindings_ready and not footer._recompose_required
            and {key.action for key in keys} >= wanted and all(key.region.area > 0 for key in keys)
            and bool(screen_lines(app)[-1].strip()))


def test_layout_thresholds():
    assert [layout_for(w) for w in (80, 119, 120, 179, 180, 250)] == [
        "narrow", "narrow", "regular", "regular", "wide", "wide"]


async def test_80x24_every_pane_is_reachable_by_keyboard_and_the_legend_and_footer_fit():
    app = opened()
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await pilot.pause()
        assert main.has_class("-narrow") and main.page == "setup"
        assert shown(main.prompt_pane) and shown(main.params_pane) and not shown(main.stream)
        footer = screen_lines(app)[-1]
        for key in ("^q Quit", "^r Run", "m Method", "[] Draft length", "^p palette"):
            assert key in footer, footer

        await pilot.press("shift+tab", "shift+tab")  # params -> prompt -> the page tabs
        assert app.focused is main.page_tabs
        reached = {}
        for page, panes in (("output", ("stream", "table")), ("detail", ("detail",)), ("stats", ("stats",))):
            await pilot.press("right")
            assert main.page == page
            for n, name in enumerate(panes):
                await pilot.press("tab")
                widget = getattr(main, name)
                assert app.focused is widget and shown(widget), (page, name, app.focused)
                reached[name] = True
                if page == "output" and n == 0:  # the legend: all four kinds, uncut
                    bottom = next(line for line in screen_lines(app) if "■ accepted draft" in line)
                    assert "■ fixed ■ bonus ■ autoregressive" in bottom
            await pilot.press(*["shift+tab"] * len(panes))
            assert app.focused is main.page_tabs
        assert set(reached) == {"stream", "table", "detail", "stats"}

        await pilot.press("e")  # a key that focuses a pane shows its page
        assert main.page == "setup" and shown(main.prompt_pane)


async def test_enter_on_a_row_shows_the_detail_page_when_narrow():
    app = opened()
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        main.table.focus()
        await pilot.pause()
        assert main.page == "output"
        await pilot.press("down", "enter")
        await pilot.pause()
        assert main.page == "detail" and app.focused is main.detail and shown(main.detail)


async def test_a_pane_focused_before_the_tabs_mount_keeps_its_page_and_the_page_settles():
    """The focus moves to the table before the page tabs have mounted (as an auto-pilot does at
    start): the tabs' own first activation and the screen's first focus arrive late, stale; the
    page stays the table's, and nothing swaps it back and forth afterwards (that loop restyled
    the screen every few milliseconds for as long as the app ran)."""
    app = opened()
    pages: list[str] = []
    seen: dict[str, object] = {}

    async def pilot_run(pilot):
        main = app.main_screen
        show_page = main.show_page
        main.show_page = lambda page: (pages.append(page), show_page(page))[1]
        main.table.focus()
        await pilot.pause()
        await pilot.pause(0.2)
        settled = len(pages)
        await pilot.pause(0.3)
        seen.update(page=main.page, tab=main.page_tabs.active, focused=app.focused is main.table,
                    more=pages[settled:])
        app.exit()

    await app.run_async(headless=True, size=(80, 24), auto_pilot=pilot_run)
    assert seen == {"page": "output", "tab": "output", "focused": True, "more": []}, (seen, pages)


async def test_200x60_gives_the_detail_and_the_drafts_room():
    app = opened("pld")
    async with app.run_test(size=(200, 60)) as pilot:
        main = app.main_screen
        await pilot.pause()
        assert main.has_class("-wide")
        assert main.detail.region.height >= 24  # was 14 rows at any size
        assert main.query_one("#left").region.width == 60
        longest = max(len("│".join(r.text for r in it.draft)) for it in main.table.iterations)
        assert longest > 22 and main.table.draft_width >= longest  # drafts were cut at 22 cells
        assert str(main.table.get_row_at(next(n for n, it in enumerate(main.table.iterations)
                                              if len("│".join(r.text for r in it.draft)) == longest))[2]) \
            .count("…") == 0


async def test_resizing_switches_the_layout_and_keeps_the_panes():
    app = opened()
    async with app.run_test(size=(140, 45)) as pilot:
        main = app.main_screen
        main.table.select_iteration(5)
        await pilot.pause()
        assert main.has_class("-regular") and shown(main.stream) and shown(main.stats)
        await pilot.resize_terminal(90, 30)
        await pilot.pause()
        assert main.has_class("-narrow") and not main.has_class("-regular")
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        assert main.has_class("-wide") and shown(main.stream) and shown(main.detail) and shown(main.prompt_pane)
        assert main.table.cursor_row == 5 and main.detail.iteration.k == 5


@pytest.mark.parametrize("width", [80, 120, 140, 159, 200])
async def test_footer_labels_never_run_into_the_next_key(width):
    app = opened()
    async with app.run_test(size=(width, 40)) as pilot:
        await wait_for(pilot, lambda: footer_laid_out(app))  # its keys arrive refreshes after the first
        footer = screen_lines(app)[-1]
        assert "←→ Change ⏎ Type ^q Quit" in footer, footer
        assert "Change^" not in footer and "lengtht" not in footer
        assert len(footer.rstrip()) <= width and footer.rstrip().endswith("^p palette"), footer  # nothing cut
        assert "f1 Help" in footer
        if width >= 160:
            assert "Draft length t Template" in footer and "f1 Help" in footer


async def test_fixed_tokens_have_their_own_colour():
    """Not the accent of pane titles and parameter values, and unlike every other kind."""
    app = opened()
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        stream, params = app.main_screen.stream, app.main_screen.params_pane
        colours = {kind: stream.get_component_rich_style(f"token-stream--{kind}").color
                   for kind in ("acc", "fix", "bonus", "ar")}
        accent = params.get_component_rich_style("params-pane--value").color
        title = stream.styles.border_title_color.rich_color
        assert colours["fix"] not in (accent, title)
        assert len(set(colours.values())) == 4


def test_bonus_position_is_not_reached_when_a_draft_was_rejected():
    result = RunResult.load(DATA / "run_spec.json")
    rejected = next(it for it in result.method.iters if it.n_accepted < len(it.draft))

    def text(it) -> str:
        parts = view_for("topk")(it, it.detail, DetailContext(method="spec"), lambda name: Style())
        return "\n".join(p.plain for p in parts if hasattr(p, "plain"))

    shown_text = text(rejected)
    assert "every draft passed" not in shown_text
    assert f"not reached: draft {rejected.n_accepted + 1} was rejected" in shown_text
    passed = msgspec.structs.replace(rejected, draft=[msgspec.structs.replace(r, status="acc") for r in rejected.draft],
                                     emit=[Emitted(r.token, r.text, "acc") for r in rejected.draft]
                                     + [Emitted(0, "x", "bonus")])
    assert "every draft passed" in text(passed)


async def test_a_run_started_on_a_narrow_terminal_shows_the_output_page(tiny_spec, loader, tmp_path):
    from tests.support.app import make_app, wait_for

    app = make_app(tiny_spec, loader, tmp_path, method="ar", max_new_tokens=8)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        assert main.page == "setup"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: main.result is not None and not main.running)
        assert main.page == "output" and shown(main.stream) and main.stream.token_count == 8, (main.layout_name, app.focused, main.status.message)


@pytest.mark.parametrize("method", ["spec", "pld", "jacobi", "ar"])
async def test_the_iterations_table_fits_at_120_columns_every_column_shown(method):
    """The docs (guide/app.md) say 120 columns fit: every column of the iterations table is in view, verify
    time included, with a run's own drafts and with a live run's long ones (five SmolLM-sized
    tokens, a hundred and more iterations, slow steps)."""
    from decoders.records.run import DraftRow, Emitted, Iteration

    app = opened(method)
    async with app.run_test(size=(120, 40)) as pilot:
        table = app.main_screen.table
        await pilot.pause()

        def fits() -> bool:
            return table.virtual_size.width <= table.scrollable_content_region.width

        assert fits(), (table.virtual_size.width, table.scrollable_content_region.width)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[-2:] == ["draft", "verify"] and "ms" in str(table.border_title)

        words = [" transformer", " attention", " cache", " speculative", " verification"]
        rows = [Iteration(k=k, pos=4 * k, emit=[Emitted(1, w, "acc") for w in words],
                          draft=[DraftRow(1, w, 0.5, 0.6, 1.0, "acc", n - 1) for n, w in enumerate(words)],
                          t_draft_ms=1234.5, t_verify_ms=987.6) for k in range(95, 130)]
        table.show_iterations([])
        for start in range(0, len(rows), 10):  # batches, as a live run brings them
            table.add_iterations(rows[start:start + 10])
            await pilot.pause()
            assert fits(), (table.virtual_size.width, table.scrollable_content_region.width)
        assert table.row_count == len(rows) and table.draft_width >= 8
        assert str(table.get_row_at(len(rows) - 1)[-1]) == "987.6"


async def test_acceptance_is_named_with_its_counts_wherever_it_is_shown():
    """"69% of judged drafts (11/16)", not a bare "69%" beside the explanation's "11 of 26 drafted
    tokens accepted": the statistics pane, the headless table, the history and the live figures."""
    from rich.console import Console

    from tui_decode.state.live_run import live_figures
    from tui_decode.state.run_history import RunHistory, Stream, row_cells
    from tui_decode.state.run_summary import judged_drafts, summary_table

    result = RunResult.load(DATA / "run_spec.json")
    s, judged = result.summary, judged_drafts(result.method)
    assert judged and s.accepted is not None and round(s.accepted / judged, 3) == s.accept_rate
    named = f"{s.accept_rate:.0%} of judged drafts ({s.accepted}/{judged})"
    app = opened()
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        assert named in "\n".join(screen_lines(app))
    console = Console(width=120, record=True, color_system=None)
    console.print(summary_table(result))
    table = console.export_text()
    assert "acceptance of judged drafts" in table and f"{s.accept_rate:.1%} ({s.accepted}/{judged})" in table
    assert row_cells(Stream(RunHistory().record(result), "method"))[4] == f"{s.accept_rate:.0%} ({s.accepted}/{judged})"
    figures = live_figures(result.method.iters)
    assert figures["judged"] == judged


FOOTER_KEYS = {"ctrl+q": "^q", "ctrl+r": "^r", "ctrl+s": "^s", "ctrl+o": "^o", "F1": "f1", "[": "[]", "]": "[]"}


def docs_footer() -> dict[int, list[str]]:
    """The keys page's footer sentence (docs/guide/keys.md): the keys it shows from each width on (0: at any width)."""
    import re

    text = " ".join((Path(__file__).parents[2] / "docs" / "guide" / "keys.md").read_text().split())
    sentence = re.search(r"The footer shows the focused pane's keys, then as many of these as the terminal's "
                         r"width holds: (.*?)\. ", text)
    assert sentence, "the keys page's footer sentence (docs/guide/keys.md)"
    tiers: dict[int, list[str]] = {}
    for part in sentence.group(1).split(";"):
        part = re.sub(r"\(and `escape` while a run goes\)", "", part)
        width = re.search(r"from (\d+) columns", part)
        tiers[int(width.group(1)) if width else 0] = re.findall(r"`([^`]+)`", part)
    return tiers


@pytest.mark.parametrize("width", [80, 120, 140, 160])
async def test_the_footer_shows_the_keys_the_docs_say_at_each_width(width):
    tiers = docs_footer()
    assert sorted(tiers) == [0, 120, 140, 160], tiers
    app = opened()
    async with app.run_test(size=(width, 40)) as pilot:
        await wait_for(pilot, lambda: screen_lines(app)[-1].strip())  # the footer recomposes for its width
        footer = screen_lines(app)[-1]
        for below, keys in tiers.items():
            for key in keys:
                shown_key = FOOTER_KEYS.get(key, key)
                if below <= width:
                    assert f"{shown_key} " in footer, (width, key, footer)
                elif key not in ("[", "]"):
                    assert f" {shown_key} " not in footer, (width, key, footer)


async def test_80x24_cuts_no_text_the_status_line_and_the_output_title_wrap_or_shorten():
    """A long status message (the save folder, what a cancel kept) wraps onto a second line, and
    the Output title drops its "Output ·" before it would cut the run's label."""
    app = opened("spec")
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await pilot.pause()
        message = ("saved 20261201-193512-spec.json and .svg in /home/someone/.local/share/tui-decode/runs/"
                   "a-folder-with-a-long-name")
        main.status.set(message, "done")
        await pilot.pause()
        text = "".join(line.strip() for line in screen_lines(app))
        assert message.replace(" ", "") in text.replace(" ", ""), screen_lines(app)[-4:]
        assert "…" not in "".join(screen_lines(app)[-4:-1])
        label = "Speculative (sampling, T=0.7, γ=4, tree 2x3) · int4 self-draft (cancelled)"
        main.stream.show_title(label)
        main.show_page("output")
        await pilot.pause()
        title_line = next(line for line in screen_lines(app) if "Speculative (sampling" in line)
        assert label in title_line and "…" not in title_line, title_line
        main.stream.show_title("Speculative (greedy, γ=4)")
        await pilot.pause()
        assert any("Output · Speculative (greedy, γ=4)" in line for line in screen_lines(app))


async def test_a_speedup_too_long_for_the_statistics_pane_breaks_before_its_spread():
    """At 120 columns the statistics pane is narrow: "3.09x slower (0.32x; spread not measured)"
    wrapped as "... spread not" / "measured)"; it breaks before the parenthesis instead."""
    app = opened("spec")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        lines = screen_lines(app)
        head = next(line for line in lines if "speedup" in line and "3.09x slower" in line)  # not the sentence
        assert "(0.32x" not in head, head
        assert any("(0.32x; spread not measured)" in line for line in lines), "\n".join(lines)


async def test_the_sentence_comes_after_the_headline_in_the_statistics_pane_and_is_in_view(tiny_spec, loader, tmp_path):
    """The explanation (what the run bought, in one sentence) follows the headline, above the
    figures, the acceptance bars and the plot: in view without scrolling."""
    from tests.support.app import make_app, run_and_wait, wait_for

    for size in ((200, 60), (120, 40)):
        app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=12)
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda app=app: app.main_screen.loaded is not None)
            result = await run_and_wait(pilot, app)
            pane = app.main_screen.stats
            children = list(pane.children)
            assert [child.id for child in children[:2]] == ["headline", "explanation"]
            explanation = pane.query_one("#explanation")
            assert pane.region.y <= explanation.region.y < pane.region.bottom
            words = result.summary.explanation.split()[:3]
            shown = " ".join(line.text for line in explanation.render_lines(explanation.region.reset_offset))
            assert " ".join(words) in " ".join(shown.split())


@pytest.mark.parametrize(("figures", "says", "colour"), [
    ((1.37, 0.20), "1.37x faster than autoregressive (+/- 0.20)", "faster"),
    ((1.02, 0.10), "No measurable difference from autoregressive (1.02x +/- 0.10)", "even"),
    ((0.62, 0.05), "1.61x slower than autoregressive (0.62x +/- 0.05)", "slower"),
])
async def test_an_opened_runs_sentence_says_what_its_headline_says(figures, says, colour):
    """A saved autoregressive run whose file says "so any gap from 1.00x is timing noise", its figures
    read 1.37x +/- 0.20 (faster), 1.02x (inside the spread) or 0.62x (slower): the pane's sentence is
    derived from the figures above it (issue 36), in the headline's words and with its verdict."""
    from decoders.analysis.verdict import headline

    result = RunResult.load(DATA / "run_ar.json")
    result.summary.speedup_decode, result.summary.speedup_spread = figures
    assert "any gap from 1.00x is timing noise" in result.summary.explanation  # what the file holds
    app = TuiDecodeApp(None, opened=result, opened_name="run_ar.json", runs_folder=Path("/nonexistent/runs"),
                       cursor_blink=False)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        explanation = app.main_screen.stats.query_one("#explanation")
        sentence = " ".join(" ".join(line.text for line in
                                     explanation.render_lines(explanation.region.reset_offset)).split())
        assert sentence.startswith(says), sentence
        assert headline(result.summary).verdict == colour
        assert ("any gap is timing noise" in sentence) == (colour == "even"), sentence
        headline_widget = app.main_screen.stats.query_one("#headline")
        figures_text = " ".join(" ".join(line.text for line in headline_widget
                                         .render_lines(headline_widget.region.reset_offset)).split())
        assert "decode speedup" in figures_text, figures_text


def pane_text(app, widget) -> str:
    """What the screen shows inside ``widget``'s content region (its visible part), line by line."""
    region = widget.content_region
    lines = screen_lines(app)[region.y:region.bottom]
    return "\n".join(line[region.x:region.right] for line in lines)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 48), (200, 60)])
async def test_the_headline_is_in_view_at_every_size_and_the_rest_scrolls_by_keyboard(size, tiny_spec, loader,
                                                                                      tmp_path):
    """At 120x40 and 160x48 the statistics pane cut off before the decode speedup, the decode
    ms/token, the end-to-end speedup and "identical": the figures a run is judged by came after
    the sentence, with no key to scroll to them. The headline now comes first, in view at every
    size; i focuses the pane and the arrows scroll the rest."""
    from tests.support.app import make_app, run_and_wait, wait_for

    app = make_app(tiny_spec, loader, tmp_path, max_new_tokens=12)
    async with app.run_test(size=size) as pilot:
        main = app.main_screen
        await wait_for(pilot, lambda: main.loaded is not None)
        result = await run_and_wait(pilot, app)
        s = result.summary
        await pilot.press("i")  # the statistics pane (its page when narrow)
        await pilot.pause()
        pane = main.stats
        assert app.focused is pane and shown(pane)
        text = " ".join(pane_text(app, pane).split())
        speed = stats_pane.speed_text(s.speedup_decode, s.speedup_spread)[0]
        assert f"decode speedup {' '.join(speed.split())}" in text, text
        assert f"decode {stats_pane._ms(s.decode_ms_per_token)} ms/token (AR " in text, text
        assert "identical yes, to the baseline" in text, text
        assert "↑↓ Scroll" in screen_lines(app)[-1]
        if pane.max_scroll_y:  # the rest is reached by keyboard
            await pilot.press("end")
            await pilot.pause()
            assert pane.scroll_y == pane.max_scroll_y > 0


@pytest.mark.parametrize("page, pane", [("setup", "params_pane"), ("output", "stream"), ("stats", "stats")])
async def test_a_resize_from_80_to_120_columns_with_the_tabs_focused_keeps_a_pane_focused(page, pane):
    """The page tabs had the focus at 80 columns; at 120 they are hidden and kept it: arrows and
    digits did nothing. The focus goes to the pane of the page that was shown."""
    app = opened()
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await pilot.pause()
        main.show_page(page)
        main.page_tabs.focus()
        await pilot.pause()
        assert app.focused is main.page_tabs
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        await pilot.pause()
        assert main.layout_name == "regular"
        assert app.focused is getattr(main, pane) and shown(app.focused), app.focused
        if pane == "params_pane":
            before = main.params_pane.selected
            await pilot.press("down")
            assert main.params_pane.selected == before + 1


@pytest.mark.parametrize("start", [20, 120])
async def test_the_footers_last_cell_is_the_palette_keys_at_20_columns(start):
    """Issue 40: at 20 columns the footer's last cell kept a character of the keys scrolled beneath
    the palette key ("^p paletteq", then "t" once the focus moved): the compact footer's margin after
    each key left that cell uncovered. Opened at 20 columns, or narrowed to 20 from wider."""
    app = opened()
    async with app.run_test(size=(start, 40)) as pilot:
        await wait_for(pilot, lambda: footer_laid_out(app))
        if start != 20:
            await pilot.resize_terminal(20, 40)
            await wait_for(pilot, lambda: footer_laid_out(app) and app.main_screen.footer._composed_for == 20)
        for _ in range(4):  # each focus its own keys (labels) in the footer
            await pilot.pause()
            footer = screen_lines(app)[-1]
            assert len(footer) == 20 and footer.endswith("▏^p palette "), (app.focused, footer)
            await pilot.press("tab")
