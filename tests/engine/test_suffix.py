"""Suffix decoding: the suffix tree's counts and drafts, greedy output equal to the baseline on the
tiny model (from this request and from the memory), a prompt never drafting from its own earlier
output, the memory's bounds and its file, and exact sampling with a one-hot draft."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

import decoders.methods.suffix as suffix_module
from decoders.backends.runner import KVRunner
from decoders.core.declarations import get_method
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.methods.shared.common import DecodeContext
from decoders.methods.shared.suffix_memory import SuffixMemory, memory_for, open_memory_file, prompt_key, reset_memories
from decoders.methods.shared.suffix_tree import SuffixTree, best_path
from decoders.methods.shared.verify import Verdict, verify_sampling
from decoders.methods.suffix import SuffixMatch
from tests.support.bigram import bigram_family, marginals
from tests.support.engine import PROMPT, tiny_family


@pytest.fixture(autouse=True)
def fresh_memories():
    reset_memories()
    yield
    reset_memories()


# --- the tree ----------------------------------------------------------------------------------------
def counts_of(tree: SuffixTree) -> dict[tuple[int, ...], tuple[int, int]]:
    out: dict[tuple[int, ...], tuple[int, int]] = {}
    stack = [((), tree.root)]
    while stack:
        path, node = stack.pop()
        if path:
            out[path] = (node.count, node.cont)
        for t, child in (node.children or {}).items():
            stack.append(((*path, t), child))
    return out


def test_the_tree_counts_every_substring_up_to_its_depth_and_appending_equals_building():
    seq = [1, 2, 3, 1, 2, 4, 1, 2, 3]
    tree = SuffixTree(3)
    tree.add(seq)
    got = counts_of(tree)
    assert got[(1, 2)] == (3, 3) and got[(1, 2, 4)] == (1, 0)  # three occurrences, followed by 3, 4 and 3
    assert got[(2, 3)] == (2, 1)  # twice, the last at the end: followed once
    assert got[(1, 2, 3)] == (2, 0)  # depth 3: nothing hangs below
    assert got[(2,)] == (3, 3) and (1, 2, 3, 1) not in got
    grown = SuffixTree(3)
    active = grown.start()
    for t in seq:
        active = grown.append(active, t)
    assert counts_of(grown) == got and grown.nodes == tree.nodes == len(got) + 1
    assert [n.count for n in active] == [got[(3,)][0], got[(2, 3)][0]]  # the tail's suffixes, shortest first


def test_removing_a_sequence_takes_back_exactly_what_it_added():
    a, b = [5, 6, 7, 5, 6, 8], [6, 7, 9, 6, 7]
    tree = SuffixTree(4)
    tree.add(a)
    alone = counts_of(tree)
    tree.add(b)
    tree.remove(b)
    assert counts_of(tree) == alone
    tree.remove(a)
    assert tree.nodes == 1 and tree.root.children is None and tree.root.cont == 0


def test_the_draft_follows_the_most_frequent_branch_within_factor_depth_and_min_prob():
    tree = SuffixTree(8)
    tree.add([1, 2, 3, 4, 5, 1, 2, 3, 4, 6, 1, 2, 3, 9])
    matched = tree.matches([7, 1, 2, 3])  # the suffixes 3, 2 3, 1 2 3 occurred; 7 1 2 3 did not
    assert len(matched) == 3
    draft = best_path(matched, max_tokens=8, factor=1.0, min_prob=0.1, depth=8)
    assert draft is not None and draft.match_len == 3
    # after "1 2 3": 4 twice, 9 once -> 4 at 2/3; after "1 2 3 4": 5 once, 6 once -> 1/2 (5: lower id on
    # a tie); then 1 for sure; three tokens: the factor (1 x the 3-token match) stops it there
    assert draft.tokens == [4, 5, 1] and draft.counts == [2, 1, 1]
    assert draft.probs == pytest.approx([2 / 3, 1 / 2, 1]) and draft.score == pytest.approx(2 / 3 + 1 / 3 + 1 / 3)
    # the factor caps the draft at factor x match length: a 1-token match drafts one token at factor 1
    short = best_path(tree.matches([3]), max_tokens=8, factor=1.0, min_prob=0.0, depth=8)
    assert short is not None and short.tokens == [4]
    # a minimum probability above the path's product stops it
    assert best_path(matched, 8, 1.0, 0.5, 8).tokens == [4]
    assert best_path(matched, 8, 1.0, 0.9, 8) is None


# --- greedy on the tiny model -------------------------------------------------------------------------
CASES = [
    DecodeParams(method="suffix", draft_policy="fixed"),
    DecodeParams(method="suffix"),
    DecodeParams(method="suffix", suffix_source="request", suffix_max=4, suffix_factor=3.0, suffix_min_prob=0.0,
                 draft_policy="fixed"),
    DecodeParams(method="suffix", suffix_depth=4, draft_policy="fixed"),
]


@pytest.mark.parametrize("params", CASES, ids=lambda p: f"{p.suffix_source}-{p.draft_policy}-d{p.suffix_depth}")
def test_greedy_suffix_decoding_emits_exactly_the_baseline(engine, params):
    result = engine.run(PROMPT, params.replace(max_new_tokens=40))
    assert result.method.ids == result.baseline.ids and len(result.method.ids) == 40
    assert result.summary.identical is True
    assert any(it.draft for it in result.method.iters)  # the prompt repeats itself: something was drafted


def test_drafts_from_an_earlier_response_are_verified_and_the_output_stays_the_baseline():
    """An earlier (different) prompt whose answer the model now repeats: the memory drafts it."""
    engine = Engine(tiny_family(fast=False), pairing="sequential")
    params = DecodeParams(method="suffix", max_new_tokens=40, draft_policy="fixed")
    baseline = engine.run(PROMPT, params.replace(method="ar")).method.ids
    memory = memory_for(engine.family, params.suffix_depth)
    memory.add("another prompt", baseline)
    result = engine.run(PROMPT, params)
    assert result.method.ids == result.baseline.ids == baseline
    from_memory = [it for it in result.method.iters if isinstance(it.detail, SuffixMatch)
                   and it.detail.source == "memory"]
    assert sum(it.n_accepted for it in from_memory) >= 20  # most of the answer came from the memory
    assert result.summary.extras["from_memory"] > 0.5 and result.summary.tau > 2
    assert result.summary.extras["memory_responses"] == 1


def test_a_prompt_never_drafts_from_its_own_earlier_output():
    """The warm-up, a rerun, or the interleaved baseline of the same prompt would hand the draft the
    very tokens the baseline gives: the memory forgets that prompt's responses before it drafts."""
    engine = Engine(tiny_family(fast=False))  # interleaved: the baseline steps beside the run
    params = DecodeParams(method="suffix", max_new_tokens=30, draft_policy="fixed")
    engine.warm(PROMPT, params)
    memory = memory_for(engine.family, params.suffix_depth)
    assert len(memory) == 1  # the warm-up's response joined
    for _ in range(2):
        result = engine.run(PROMPT, params)
        sources = {it.detail.source for it in result.method.iters if isinstance(it.detail, SuffixMatch)}
        assert "memory" not in sources
        assert result.summary.extras["memory_responses"] == 0
    assert len(memory) == 1 and list(memory.entries.values())[0].tokens == result.method.ids
    assert list(memory.entries.values())[0].prompt == prompt_key(result.prompt_ids)


def test_suffix_is_a_registered_method_with_bounded_parameters():
    method = get_method("suffix")
    assert method.detail == "suffix" and not method.needs_helper and not method.greedy_only
    with pytest.raises(DecodeError, match="suffix_depth must be an integer <= 64"):
        DecodeParams(method="suffix", suffix_depth=65).validated()
    with pytest.raises(DecodeError, match="suffix_factor must be a number >= 0.1"):
        DecodeParams(method="suffix", suffix_factor=0.0).validated()


# --- the memory --------------------------------------------------------------------------------------
def test_the_memory_evicts_its_oldest_responses_by_count_and_by_size():
    memory = SuffixMemory(depth=4, max_requests=2)
    for i in range(3):
        memory.add(f"p{i}", [i, 10 + i, 20 + i])
    assert [e.prompt for e in memory.entries.values()] == ["p1", "p2"] and memory.evicted == 1
    assert memory.tree.walk([0]) is None and memory.tree.walk([1, 11]) is not None
    small = SuffixMemory(depth=4, max_nodes=12)
    small.add("a", [1, 2, 3, 4])  # 4 + 3 + 2 + 1 = 10 nodes and the root
    small.add("b", [5, 6])  # 3 more: over 12, so "a" goes
    assert [e.prompt for e in small.entries.values()] == ["b"] and small.nodes == 4
    small.add("b", [7])  # the same prompt again replaces its earlier response
    assert [e.tokens for e in small.entries.values()] == [[7]]


def test_the_memory_file_round_trips_and_a_damaged_or_foreign_file_is_refused_and_left_intact(tmp_path):
    family = tiny_family(fast=False)
    path = tmp_path / "memory.json"
    memory = open_memory_file(family, str(path), 8)
    memory.add("p", [1, 2, 3, 1, 2])
    memory.save()
    kept = path.read_bytes()
    reset_memories()
    again = open_memory_file(family, str(path), 8)
    assert [e.tokens for e in again.entries.values()] == [[1, 2, 3, 1, 2]] and again.nodes == memory.nodes

    damaged = kept[: len(kept) // 2]
    path.write_bytes(damaged)
    reset_memories()
    with pytest.raises(DecodeError) as err:
        open_memory_file(family, str(path), 8)
    assert "is damaged or not a memory file" in str(err.value) and "\n" not in str(err.value)
    assert path.read_bytes() == damaged  # refused, never rewritten

    foreign = json.loads(kept)
    foreign["identity"] = "another model"
    path.write_text(json.dumps(foreign))
    reset_memories()
    with pytest.raises(DecodeError, match="was built for another model or tokenizer"):
        open_memory_file(family, str(path), 8)

    bad_ids = json.loads(kept)
    bad_ids["responses"][0][1][0] = 10**6
    path.write_text(json.dumps(bad_ids))
    reset_memories()
    with pytest.raises(DecodeError, match="holds token id 1000000, outside this tokenizer's 64 ids"):
        open_memory_file(family, str(path), 8)


def test_a_finished_response_is_written_to_the_memory_file(tmp_path):
    engine = Engine(tiny_family(fast=False), pairing="sequential")
    path = tmp_path / "m.json"
    open_memory_file(engine.family, str(path), 24)
    result = engine.run(PROMPT, DecodeParams(method="suffix", max_new_tokens=12))
    kept = json.loads(path.read_text())
    assert kept["responses"] == [[prompt_key(result.prompt_ids), result.method.ids]]


# --- exact sampling ----------------------------------------------------------------------------------
V = 12
TEMPERATURE = 0.7
TOKENS, RUNS = 4, 1500
PROMPT_IDS = [5, 6, 7, 5, 6, 7, 5, 6, 7]  # repeats: the request's tree drafts "5 6 7" after "7"


def position_counts(runs: int = RUNS) -> tuple[np.ndarray, int]:
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(V, V, generator=gen) * 1.5
    family = bigram_family(target, target)
    main = KVRunner(family.main)
    method = get_method("suffix")
    counts = np.zeros((TOKENS, V))
    drafted = 0
    for seed in range(runs):
        params = DecodeParams(method="suffix", mode="sampling", temperature=TEMPERATURE, seed=seed,
                              max_new_tokens=TOKENS, record=False, draft_policy="fixed", suffix_source="request",
                              suffix_factor=2.0)
        main.reset()
        run = method.run(DecodeContext(family, PROMPT_IDS, params, main, None, time.perf_counter))
        while True:
            try:
                next(run)
            except StopIteration as stop:
                ids = stop.value.ids
                drafted += sum(len(it.draft) for it in stop.value.iters)
                break
        counts[np.arange(TOKENS), ids] += 1
    return counts, drafted


def worst_pvalue(counts: np.ndarray) -> float:
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(V, V, generator=gen) * 1.5
    expected = marginals(target, PROMPT_IDS[-1], len(counts), TEMPERATURE).numpy()
    return min(chisquare(row, row.sum() * exp).pvalue for row, exp in zip(counts, expected, strict=False))


@pytest.mark.slow
def test_sampling_emits_every_position_as_the_tempered_target_does():
    counts, drafted = position_counts()
    assert drafted > RUNS  # every run drafts: the exactness is the verifier's, not a lack of drafts
    assert worst_pvalue(counts) > 1e-3


def always_accept(p, q, drafts, gen):
    v = verify_sampling(p, q, drafts, gen)
    g = drafts.numel()
    bonus = v.next_token if g == 0 else torch.multinomial(p[g], 1, generator=gen)[0]
    return Verdict(torch.tensor(g), bonus, v.acc_prob, v.beta)


@pytest.mark.slow
def test_a_verifier_that_accepts_the_one_hot_draft_blindly_is_caught(monkeypatch):
    monkeypatch.setattr(suffix_module, "verify_sampling", always_accept)
    counts, _ = position_counts()
    assert worst_pvalue(counts) < 1e-8


# --- the datastore -----------------------------------------------------------------------------------
def test_a_datastore_is_built_from_text_documents_and_a_bad_jsonl_line_is_named(tmp_path):
    from decoders.training.datastore import build, documents

    family = tiny_family(fast=False)
    text = tmp_path / "c.txt"
    text.write_text("w10 w11 w12\n\nw20 w21\nw22\n\n\n")
    docs = documents(text, family)
    assert len(docs) == 2 and docs[0] == list(family.tokenizer("w10 w11 w12", add_special_tokens=False)["input_ids"])
    memory = SuffixMemory(depth=6)
    report = build(memory, docs, tmp_path / "m.json")
    assert (report.documents, report.responses, report.tokens) == (2, 2, sum(map(len, docs)))
    assert report.nodes == memory.nodes > 1 and report.file_bytes == (tmp_path / "m.json").stat().st_size
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"text": "w10"}\n{"title": "w11"}\n')
    with pytest.raises(DecodeError, match="line 2 of the corpus .* has none of the text fields text, response"):
        documents(bad, family)
