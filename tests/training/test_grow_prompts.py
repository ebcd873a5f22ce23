"""The corpus's prompt order: the first set ("p"), the second ("q", two per "p"), and summaries ("s")
and questions ("r") about earlier long answers, resumable by key, never the bench's prompts."""

from __future__ import annotations

import json
from pathlib import Path

from decoders.training.corpus import Corpus
from decoders.training.grow import SUMMARY_EVERY, SUMMARY_MIN_TOKENS, pending
from decoders.training.prompts import more_prompts, training_prompts

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _decode(ids):
    return f"<{len(ids)} ids>"


def test_the_second_set_interleaves_two_for_each_of_the_first_and_asks_about_long_answers(tmp_path):
    corpus = Corpus(tmp_path / "c", model="m", vocab_size=100, append=True)
    corpus.append("p0", [1, 2], [3] * SUMMARY_MIN_TOKENS)  # long: summarised and asked about
    corpus.append("q0", [1, 2], [4] * 5)  # short: neither
    todo = pending(corpus, ["a", "b", "c"], 9, _decode, ["x", "y", "z", "w"])
    keys = [k for k, _ in todo]
    # every SUMMARY_EVERY-th is about an earlier answer; once the plain prompts run out, the rest are
    assert SUMMARY_EVERY == 6
    assert keys == ["q1", "q2", "p1", "q3", "p2", "sp0", "rp0"]
    asked = dict(todo)["rp0"]
    assert f"<{SUMMARY_MIN_TOKENS} ids>" in asked and asked.startswith("Use the text below")


def test_a_corpus_without_the_second_set_keeps_its_old_order(tmp_path):
    corpus = Corpus(tmp_path / "c", model="m", vocab_size=100, append=True)
    corpus.append("p0", [1], [2])
    assert [k for k, _ in pending(corpus, ["a", "b", "c"], 2, _decode)] == ["p1", "p2"]


def test_the_second_set_is_fixed_distinct_and_not_the_benchs_prompts():
    first, second = more_prompts(), more_prompts()
    assert first == second and len(set(first)) == len(first) == 4000
    assert not set(first) & set(training_prompts())
    bench_texts = set()
    for path in BENCH.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            for turn in row.get("turns", []) or [row.get("prompt", "")]:
                bench_texts.add(turn.strip())
    assert bench_texts, "the bench's prompts were not found"
    assert not bench_texts & {p.strip() for p in first}
