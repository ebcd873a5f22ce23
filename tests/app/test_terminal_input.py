"""Key bursts read as pastes (`tui_decode.driver`), and the prompt editor's bound (issue 40): a
terminal without bracketed paste delivers a paste key by key, and a 1 MB one took minutes and GBs,
its one-letter keys acting where the prompt had no focus."""

from __future__ import annotations

import pytest
from textual import events
from textual._xterm_parser import XTermParser

from tests.support.app import SIZE, make_app, wait_for
from tui_decode.driver import Bursts, plain_text, read_into


def parsed(data: str, parser: XTermParser | None = None) -> list:
    return list((parser or XTermParser()).feed(data))


def read_all(chunks: list[str], limit: int = 1000) -> list:
    """What the app receives when the terminal gives ``chunks`` one read each, then nothing."""
    posted: list = []
    bursts, parser = Bursts(posted.append, limit=limit), XTermParser()
    for chunk in chunks:
        read_into(bursts, parser, chunk)
    bursts.flush()
    return posted


def described(posted: list) -> list[str]:
    return [f"paste {e.text!r}" if isinstance(e, events.Paste) else f"key {e.key}" for e in posted]


def test_a_key_typed_alone_goes_on_as_a_key():
    assert described(read_all(["s"])) == ["key s"]
    assert described(read_all(["s", "g", "\r"])) == ["key s", "key g", "key enter"]  # one read each: typed


def test_text_keys_read_together_are_one_paste_with_its_newlines_and_tabs():
    assert described(read_all(["ab c\rd\te"])) == ["paste 'ab c\\nd\\te'"]


def test_a_burst_goes_on_across_the_reads_that_follow_it():
    assert described(read_all(["hello wo", "r", "ld\rnext"])) == ["paste 'hello world\\nnext'"]


def test_other_events_split_a_burst_and_keep_their_place():
    # an arrow key (an escape sequence) between two bursts; a key alone after it is typed
    assert described(read_all(["abc\x1b[Bde", "\x1b[A", "x"])) == [
        "paste 'abc'", "key down", "paste 'de'", "key up", "key x"]


def test_a_bracketed_paste_passes_as_it_came():
    assert described(read_all(["ab\x1b[200~pasted\x1b[201~"])) == ["paste 'ab'", "paste 'pasted'"]


def test_plain_text_is_read_whole_and_escape_sequences_split_across_reads_still_parsed():
    assert plain_text("ab c\rd\te\n") and not plain_text("ab\x1b[B") and not plain_text("ab\x7f")
    # an arrow key cut in two by the reads, then a bracketed paste cut in three: never taken for text
    assert described(read_all(["abc\x1b[", "Bxy", "zz"])) == ["paste 'abc'", "key down", "paste 'xyzz'"]
    assert described(read_all(["abc\x1b[20", "0~pasted", " more", "\x1b[201~", "x"])) == [
        "paste 'abc'", "paste 'pasted more'", "key x"]


def test_a_burst_keeps_at_most_its_limit():
    posted = read_all(["x" * 700, "y" * 700], limit=1000)
    assert described(posted) == [f"paste {'x' * 700 + 'y' * 300!r}"]


# -- the prompt editor's bound ---------------------------------------------------------------------
@pytest.mark.anyio
async def test_a_paste_past_the_prompts_bound_is_cut_there_with_one_notice(tiny_spec, loader, tmp_path, monkeypatch):
    import tui_decode.widgets.prompt_pane as prompt_pane

    monkeypatch.setattr(prompt_pane, "MAX_PROMPT", 100)
    app = make_app(tiny_spec, loader, tmp_path, method="ar")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        editor = app.main_screen.prompt_pane.editor
        editor.text = "start "
        editor.focus()
        editor.move_cursor(editor.document.end)
        await pilot.pause()
        for _ in range(3):  # a long paste arrives as several (a burst across reads)
            editor.post_message(events.Paste("0123456789" * 5))
            await pilot.pause()
        await wait_for(pilot, lambda: len(editor.text) == 100)
        await pilot.press("z")  # typed at the bound: cut too, and not said again
        await pilot.pause()
        assert editor.text == "start " + ("0123456789" * 10)[:94]
        notices = [n.message for n in app._notifications if n.title == "Prompt cut"]
        assert notices == ["The prompt holds at most 100 characters: 50 pasted or typed, 44 of them kept."]
        await pilot.press("backspace", "backspace", "a", "b", "c")  # room again: typed as ever
        await pilot.pause()
        assert editor.text.endswith("01ab") and len(editor.text) == 100
        assert len([n for n in app._notifications if n.title == "Prompt cut"]) == 2  # the second cut is said
