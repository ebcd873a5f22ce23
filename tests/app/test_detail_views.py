"""The iteration detail views, one per detail kind, picked through the registry: each recorded
method's iterations reach their view, and every view draws them without a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console, Group
from rich.style import Style

from decoders.records.run import RunResult
from tui_decode.widgets.details import PLAIN, DetailContext, view_for, view_kinds
from tui_decode.widgets.iteration_detail import detail_of

DATA = Path(__file__).parents[1] / "data"
EXPECTED = {  # method -> (detail kind of its drafting iterations, words its view always shows)
    "ar": (PLAIN, "A plain step"),
    "spec": ("topk", "p: target model's top-5"),
    "pld": ("lookup", "copy starts at"),
    "jacobi": ("jacobi", "guesses →"),
}


def drawn(parts) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(Group(*parts))
    return console.export_text()


def test_every_built_in_kind_has_a_view():
    assert {PLAIN, "topk", "lookup", "jacobi"} <= set(view_kinds())
    assert view_for("no-such-kind") is view_for(PLAIN) is view_for(None)


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_recorded_iterations_reach_their_view(method):
    result = RunResult.load(DATA / f"run_{method}.json")
    kind, words = EXPECTED[method]
    context = DetailContext(method=method, prompt=result.prompt, prompt_tokens=len(result.prompt_ids),
                            output_tokens=list(result.method.tokens))
    kinds = set()
    texts = []
    for it in result.method.iters:
        it_kind, detail = detail_of(it, method)
        kinds.add(it_kind)
        texts.append(drawn(view_for(it_kind)(it, detail, context, lambda name: Style())))
    assert kinds == {kind}  # a prompt-lookup step without a match is still a lookup step
    assert any(words in text for text in texts)


def test_a_draft_tree_is_drawn_indented_depth_first():
    """Rows of a tree (a speculative draft tree: the chain first, then the alternatives) are drawn
    each under its parent, so the alternative of the first position comes right after the root."""
    from rich.console import Console

    from decoders.records.run import DraftRow, Iteration
    from decoders.records.run import Emitted as Emit
    from tui_decode.widgets.details.base import depth_first, draft_table

    rows = [DraftRow(11, "a", 0.5, 0.1, 0.0, "rej", -1), DraftRow(12, "b", 0.4, None, 0.0, "unv", 0),
            DraftRow(13, "X", 0.3, 0.8, 1.0, "acc", -1), DraftRow(14, "Y", 0.2, 0.05, 0.0, "rej", 0)]
    it = Iteration(k=1, pos=5, draft=rows, emit=[Emit(13, "X", "acc"), Emit(15, "Z", "fix")], t_draft_ms=1.0,
                   t_verify_ms=2.0)
    assert depth_first(it) == [0, 1, 3, 2]
    console = Console(width=100, record=True)
    console.print(draft_table(it, lambda name: Style()))
    lines = [line for line in console.export_text().splitlines() if line.strip()]
    tokens = [line.split()[0:3] for line in lines[1:5]]
    assert tokens == [["1", "┬", "a"], ["2", "└", "b"], ["4", "└", "Y"], ["3", "┬", "X"]]
    assert lines[2].index("└") > lines[1].index("┬")  # indented under its parent
    assert "token tree" in lines[0]
    linear = Iteration(k=1, pos=5, draft=[DraftRow(11, "a", 0.5, 0.1, 1.0, "acc", -1),
                                          DraftRow(12, "b", 0.4, 0.2, 0.0, "rej", 0)],
                       emit=[Emit(11, "a", "acc"), Emit(9, "c", "fix")], t_draft_ms=1.0, t_verify_ms=2.0)
    console = Console(width=100, record=True)
    console.print(draft_table(linear, lambda name: Style()))
    assert "┬" not in console.export_text() and "tree" not in console.export_text()


def test_lookahead_steps_show_the_pool_the_window_and_the_chosen_shape():
    """Every lookahead iteration reaches the lookahead view: the pool before the step, its hits
    and what was accepted, the window that ran, and on the first step the shape and why."""
    from decoders.core.params import DecodeParams
    from decoders.engine import Engine
    from tests.support.engine import PROMPT, tiny_family

    result = Engine(tiny_family(fast=True)).run(PROMPT, DecodeParams(method="lookahead", max_new_tokens=24))
    context = DetailContext(method="lookahead", prompt=result.prompt, prompt_tokens=len(result.prompt_ids),
                            output_tokens=list(result.method.tokens))
    texts = []
    for it in result.method.iters:
        kind, detail = detail_of(it, "lookahead")
        assert kind == "lookahead"
        texts.append(drawn(view_for(kind)(it, detail, context, lambda name: Style())))
    first = result.method.iters[0].detail
    assert f"pool {first.pool} window n-grams before this step; {first.hits} candidate" in texts[0]
    assert "shape W=1, G=1: narrowed from W=4, G=4" in texts[0] and "shape W=" not in texts[1]
    assert all("level 0" in t and "level 1" in t for t in texts)
    hit = next(i for i, it in enumerate(result.method.iters) if it.draft)
    assert f"{result.method.iters[hit].detail.accepted} token" in texts[hit] and "token tree" not in texts[hit]
    for it, text in zip(result.method.iters, texts, strict=False):  # offered but left out: the budget says why
        if it.detail.hits and not it.draft:
            assert "none paid for its positions" in text


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_a_final_iteration_that_drafted_nothing_says_so_once():
    """The budget's last token: speculative decoding drafts nothing and Jacobi's block holds no
    guesses. Each is a plain step and the detail says that once, not a draft length or "a block
    of 0 guesses" above empty rows."""
    from textual.app import App

    from decoders.methods.jacobi import JacobiBlock
    from decoders.records.run import Emitted, Iteration
    from tui_decode.widgets import IterationDetail

    class Holder(App):
        def compose(self):
            yield IterationDetail()

    def text(detail) -> str:
        return " ".join(drawn([detail.body.content]).split())

    async with Holder().run_test(size=(100, 20)) as pilot:
        detail = pilot.app.query_one(IterationDetail)
        last = Iteration(k=28, pos=47, draft=[], emit=[Emitted(5, " computer", "ar")], draft_stop="budget")
        detail.show(last, DetailContext(method="spec"))
        await pilot.pause()
        shown = text(detail)
        assert "A plain step: one target forward, one token, nothing drafted: no tokens were left to draft" in shown
        assert "draft length" not in shown and "drafted up to the tokens left" not in shown
        assert shown.count("nothing drafted") == 1

        block = Iteration(k=39, pos=39, draft=[], emit=[Emitted(7, " beta", "ar")],
                          detail=JacobiBlock(before=[], after=[], fixed=1))
        detail.show(block, DetailContext(method="jacobi"))
        await pilot.pause()
        shown = text(detail)
        assert "A plain step: one target forward, one token, nothing drafted." in shown
        assert "guesses" not in shown and "before" not in shown and "after" not in shown


def test_a_stop_token_inside_a_draft_shows_what_was_emitted():
    """Four drafts accepted, the second a stop token: two reached the output, the two after it and
    the bonus never did. The detail says so, as the statistics count it (2 accepted of 4 judged)."""
    from decoders.analysis.stats import DecodeStats
    from decoders.records.details import TopK
    from decoders.records.run import DraftRow, Emitted, Iteration, TopEntry
    from tui_decode.widgets.details.base import draft_table
    from tui_decode.widgets.iteration_detail import IterationDetail

    rows = [DraftRow(10 + i, f"t{i}", 0.9, 0.9, 1.0, "acc") for i in range(4)]
    top = [[TopEntry(10 + i, f"t{i}", 0.9)] for i in range(5)]
    it = Iteration(k=3, pos=12, draft=rows, emit=[Emitted(10, "t0", "acc"), Emitted(11, "</s>", "acc")],
                   detail=TopK(p=top, q=top[:4]))
    assert DecodeStats.of([it]).accepted == 2
    shown = drawn(view_for("topk")(it, it.detail, DetailContext(method="spec"), lambda name: Style()))
    assert "every draft passed" not in shown and "adds its own next token" not in shown
    assert "no bonus: the output ended at draft 2" in shown
    assert shown.count("accepted, not emitted") == 2
    table = drawn([draft_table(it, lambda name: Style())])
    assert table.count("accepted, not emitted") == 2
    holder = type("H", (), {"_style": lambda self, name: Style()})()  # the line above every view
    line = IterationDetail._summary_line(holder, it).plain  # type: ignore[arg-type]
    assert "accepted 4 (2 emitted: the output ended inside the draft)" in line
