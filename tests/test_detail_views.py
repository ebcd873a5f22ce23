"""The iteration detail views, one per detail kind, picked through the registry: each recorded
method's iterations reach their view, and every view draws them without a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console, Group
from rich.style import Style

from decoders.records import RunResult
from tui_decode.widgets.details import PLAIN, DetailContext, view_for, view_kinds
from tui_decode.widgets.iteration_detail import detail_of

DATA = Path(__file__).parent / "data"
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
