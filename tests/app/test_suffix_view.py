"""Suffix decoding's iteration detail: the matched suffix, where it came from, the candidates'
counts and frequencies, and the cost cut in words."""

from __future__ import annotations

from rich.console import Console, Group
from rich.style import Style

from decoders.methods.suffix import SuffixMatch
from decoders.records.run import DraftRow, Emitted, Iteration
from tui_decode.widgets.details import DetailContext, view_for
from tui_decode.widgets.iteration_detail import detail_of


def drawn(it: Iteration) -> str:
    kind, detail = detail_of(it, "suffix")
    console = Console(width=120, record=True, color_system=None)
    console.print(Group(*view_for(kind)(it, detail, DetailContext(method="suffix"), lambda name: Style())))
    return console.export_text()


def test_the_view_names_the_match_its_source_and_each_candidates_count():
    match = SuffixMatch(source="memory", n=2, suffix=["·the", "·cat"], counts=[7, 3, 1], probs=[0.7, 0.43, 1.0],
                        score=1.3, found=3, memory=5)
    rows = [DraftRow(11, "·sat", None, 0.9, 1.0, "acc", -1), DraftRow(12, "·on", None, 0.2, 0.0, "rej", 0)]
    it = Iteration(k=3, pos=9, draft=rows, emit=[Emitted(11, "·sat", "acc"), Emitted(13, "·in", "fix")],
                   t_draft_ms=0.1, t_verify_ms=20.0, detail=match)
    text = drawn(it)
    assert 'matched 2-token suffix "·the·cat" in an earlier response (the memory)' in text
    assert "candidate score 1.30" in text and "the memory held 5 earlier responses" in text
    lines = [line.split() for line in text.splitlines()]
    assert ["1", "7", "0.70", "0.70"] in lines and ["2", "3", "0.43", "0.30"] in lines
    assert "the tree offered 3 tokens; cut to 2: a longer draft would not pay for its verify cost" in text
    assert "rejected" in text  # the draft table below


def test_a_hybrid_speculative_iteration_the_suffix_trees_drafted_shows_their_match():
    """Speculative decoding with --hybrid suffix: an iteration the suffix trees drafted carries their
    record, so it gets this view in a spec run too."""
    match = SuffixMatch(source="request", n=3, suffix=["a", "b", "c"], counts=[4], probs=[0.8], score=0.8, found=1)
    it = Iteration(k=2, pos=5, draft=[DraftRow(7, "d", None, None, 1.0, "acc", -1)],
                   emit=[Emitted(7, "d", "acc"), Emitted(8, "e", "bonus")], detail=match,
                   draft_stop="the suffix trees drafted (a 3-token match in this request): 0.80 expected accepted "
                              "tokens against the helper draft's 0.50")
    kind, _ = detail_of(it, "spec")
    assert kind == "suffix"
    assert 'matched 3-token suffix "abc" in this prompt and the output so far' in drawn(it)


def test_a_step_without_a_match_says_it_was_a_plain_step():
    it = Iteration(k=1, pos=1, draft=[], emit=[Emitted(4, "a", "ar")], t_draft_ms=0.0, t_verify_ms=9.0)
    assert "nothing was drafted: this iteration was a plain step" in " ".join(drawn(it).split())
