"""FR-Spec: an EAGLE-1/2 head sharing the target's LM head drafts over the N most frequent tokens
only; the draft's logits are the full head's on those rows, -inf elsewhere, and the target's
output is unchanged (greedy identical, sampling exact by q = 0 outside the subset)."""

from __future__ import annotations

import json

import pytest
import torch

from decoders.backends.heads import head_draft
from decoders.backends.heads.fr_spec import ranked_ids
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.models.backend_choice import make_backend
from decoders.models.drafts import TrainedHead
from decoders.models.family import Family
from tests.support.engine import PROMPT, VOCAB, peaked_model
from tests.support.heads import write_head
from tests.support.tiny import tiny_tokenizer

RANKING = [7, 3, 11, 40, 2, 9, 15, 60, 33, 21, 1, 0, 5, 8, 13, 17]  # most frequent first


@pytest.fixture
def setting(tmp_path):
    model = peaked_model(layers=5)
    write_head(tmp_path / "h", "eagle1")
    (tmp_path / "rank.json").write_text(json.dumps(RANKING))
    return model, make_backend(model, fast=True), tmp_path


def _logits(draft, ids):
    draft.reset()
    return draft.forward(torch.tensor(ids), keep=len(ids))


def test_the_subset_heads_logits_are_the_full_heads_on_its_rows_and_minus_inf_elsewhere(setting):
    model, main, tmp = setting
    full = head_draft(tmp / "h", main, model)
    cut = head_draft(tmp / "h", main, model, (10, str(tmp / "rank.json")))
    assert cut.head.config.draft_vocab == 10 and cut.head.lm_head.weight.shape == (10, full.head.config.hidden)
    assert "FR-Spec 10 tokens" in cut.source
    ids = [5, 9, 13, 22, 7]
    a, b = _logits(full, ids), _logits(cut, ids)
    keep = torch.tensor(sorted(RANKING[:10]))
    assert torch.allclose(a[:, keep], b[:, keep], atol=1e-5)
    outside = torch.ones(VOCAB, dtype=torch.bool)
    outside[keep] = False
    assert torch.isinf(b[:, outside]).all() and (b[:, outside] < 0).all()
    # the target's own LM head is not touched: the full head still has every row
    assert full.head.config.draft_vocab == VOCAB


@pytest.mark.parametrize("extra", [{"mode": "greedy"}, {"mode": "sampling", "temperature": 1.0, "seed": 3}])
def test_decoding_with_the_subset_head_keeps_the_targets_output(setting, extra):
    model, main, tmp = setting
    draft = head_draft(tmp / "h", main, model, (6, str(tmp / "rank.json")))
    family = Family(label="tiny", main=main, helper=draft, tokenizer=tiny_tokenizer(VOCAB), stop_ids=frozenset(),
                    device=torch.device("cpu"), dtype=torch.float32, main_source="tiny", helper_source=draft.source,
                    context_length=128, vocab_size=VOCAB, main_model=model, draft=TrainedHead())
    result = Engine(family, pairing="sequential").run(PROMPT, DecodeParams(method="spec", gamma=3, max_new_tokens=20,
                                                                            draft_policy="fixed", **extra))
    if extra["mode"] == "greedy":
        assert result.summary.identical is True, result.summary.first_divergence
    drafted = [row.token for it in result.method.iters for row in it.draft]
    assert drafted and set(drafted) <= set(RANKING[:6])  # the head only proposes tokens of the subset


def test_a_corpus_ranks_by_its_token_counts(tmp_path):
    import array

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "meta.json").write_text(json.dumps({"model": "tiny", "vocab_size": VOCAB, "token_bytes": 2}))
    (folder / "tokens.u16").write_bytes(array.array("H", [4] * 5 + [9] * 3 + [2] * 7 + [30]).tobytes())
    ranked = ranked_ids(str(folder), VOCAB).tolist()
    assert ranked[:6] == [2, 4, 9, 30, 0, 1] and sorted(ranked) == list(range(VOCAB))  # then the unseen, by id
    (folder / "meta.json").write_text(json.dumps({"vocab_size": 49152}))
    with pytest.raises(DecodeError, match="a corpus of a 49152-token vocabulary, and this model has 64"):
        ranked_ids(str(folder), VOCAB)


def test_bad_rankings_and_sizes_are_one_line_each(setting):
    model, main, tmp = setting
    cases = {
        "missing.json": (4, "does not exist; give a file of token ids"),
        "junk.json": (4, "is not a list of token ids"),
        "outside.json": (4, "holds ids outside 0..63, this model's vocabulary"),
        "twice.json": (4, "names some token twice"),
        "rank.json": (17, r"asks for more tokens than the ranking holds \(16\)"),
    }
    (tmp / "junk.json").write_text("{")
    (tmp / "outside.json").write_text(json.dumps([1, 2, 64]))
    (tmp / "twice.json").write_text(json.dumps([1, 2, 2]))
    import os

    os.mkfifo(tmp / "pipe")
    cases["pipe"] = (4, "is not a regular file")
    for name, (size, message) in cases.items():
        with pytest.raises(DecodeError, match=message):
            head_draft(tmp / "h", main, model, (size, str(tmp / name)))
    with pytest.raises(DecodeError, match=r"--head-vocab 0 is outside 1..64"):
        head_draft(tmp / "h", main, model, (0, str(tmp / "rank.json")))
    write_head(tmp / "h3", "eagle3")
    with pytest.raises(DecodeError, match="this EAGLE-3 head has its own 40-token vocabulary"):
        head_draft(tmp / "h3", main, model, (8, str(tmp / "rank.json")))
    write_head(tmp / "m", "medusa")
    with pytest.raises(DecodeError, match="Medusa heads have their own"):
        head_draft(tmp / "m", main, model, (8, str(tmp / "rank.json")))
