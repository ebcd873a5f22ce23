"""A saved run's token texts against its ids (`decoders.records.files.token_texts_from_ids`): the
ids are the record; texts that disagree are decoded again, or shown as the id."""

from __future__ import annotations

from pathlib import Path

from decoders.records.files import token_texts_from_ids
from decoders.records.run import RunResult

DATA = Path(__file__).resolve().parents[1] / "data"


def every_text(result: RunResult) -> list[str]:
    out = []
    for run in (result.method, result.baseline):
        out += list(run.tokens)
        out += [row.text for it in run.iters for row in (*it.emit, *it.draft)]
    return out


def test_a_run_whose_texts_agree_is_left_as_it_is():
    result = RunResult.load(DATA / "run_spec.json")
    before = every_text(result)
    assert token_texts_from_ids(result) is None
    assert every_text(result) == before


def test_without_a_tokenizer_an_id_with_two_texts_shows_as_the_id_everywhere():
    result = RunResult.load(DATA / "run_spec.json")
    result.method.tokens[1] = " slow"  # id 2365, " quick" in every other place
    note = token_texts_from_ids(result)
    assert note is not None and "id 2365: ' slow' and ' quick'" in note and "<id N>" in note
    texts = every_text(result)
    assert " slow" not in texts and " quick" not in texts and "<id 2365>" in texts
    assert result.method.tokens[:3] == ["The", "<id 2365>", " brown"] and result.method.ids[1] == 2365
    assert result.baseline.tokens[1] == "<id 2365>"  # the same id in the baseline: one text for it


def test_with_the_tokenizer_every_text_is_its_ids():
    result = RunResult.load(DATA / "run_spec.json")
    result.method.tokens[0] = "EDITED"
    result.method.iters[0].emit[0].text = "EDITED"
    vocab = {token: text for token, text in zip(result.baseline.ids, result.baseline.tokens, strict=True)}
    vocab |= {row.token: row.text for it in result.method.iters for row in it.draft}

    def display(token: int) -> str:
        return vocab.get(token, f"<id {token}>")

    note = token_texts_from_ids(result, display, lambda ids: "".join(map(display, ids)), "the test tokenizer")
    assert note is not None and "'EDITED'" in note and "shown as the test tokenizer decodes the ids" in note
    assert result.method.tokens == [display(t) for t in result.method.ids] and "EDITED" not in every_text(result)
    assert result.method.text == "".join(map(display, result.method.ids))
    assert token_texts_from_ids(result, display) is None  # now they agree
