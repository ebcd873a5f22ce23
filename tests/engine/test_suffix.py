"""Suffix decoding: the suffix tree's counts and drafts, greedy output equal to the baseline on the
tiny model (from this request and from the memory), a prompt never drafting from its own earlier
output, the memory's bounds and its file, and exact sampling with a one-hot draft."""

from __future__ import annotations

import json
import os
import time
from array import array

import msgspec
import numpy as np
import pytest
import torch
from scipy.stats import chisquare

import decoders.methods.shared.suffix_memory as suffix_memory_module
import decoders.methods.suffix as suffix_module
from decoders.backends.runner import KVRunner
from decoders.core.declarations import get_method
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.methods.shared.common import DecodeContext
from decoders.methods.shared.suffix_draft import best_path, best_tree
from decoders.methods.shared.suffix_memory import (
    SuffixMemory,
    identity,
    memory_for,
    open_memory_file,
    prompt_key,
    read_memory_file,
    reset_memories,
)
from decoders.methods.shared.suffix_tree import BYTES_PER_NODE, FIELDS, SuffixTree
from decoders.methods.shared.verify import Verdict, verify_sampling
from decoders.methods.suffix import SuffixMatch
from tests.support.bigram import bigram_family, marginals
from tests.support.engine import PROMPT, tiny_family
from tests.support.writers import dead_pid, run_python


@pytest.fixture(autouse=True)
def fresh_memories():
    reset_memories()
    yield
    reset_memories()


# --- the tree ----------------------------------------------------------------------------------------
def counts_of(tree: SuffixTree) -> dict[tuple[int, ...], tuple[int, int]]:
    return tree.substrings()


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
    assert [grown.count[n] for n in active] == [got[(3,)][0], got[(2, 3)][0]]  # the tail's suffixes, shortest first


def test_removing_a_sequence_takes_back_exactly_what_it_added():
    a, b = [5, 6, 7, 5, 6, 8], [6, 7, 9, 6, 7]
    tree = SuffixTree(4)
    tree.add(a)
    alone = counts_of(tree)
    tree.add(b)
    tree.remove(b)
    assert counts_of(tree) == alone
    tree.remove(a)
    assert tree.nodes == 1 and tree.first[0] == -1 and tree.cont[0] == 0 and tree.best[0] == -1


def test_the_draft_follows_the_most_frequent_branch_within_factor_depth_and_min_prob():
    tree = SuffixTree(8)
    tree.add([1, 2, 3, 4, 5, 1, 2, 3, 4, 6, 1, 2, 3, 9])
    matched = tree.matches([7, 1, 2, 3])  # the suffixes 3, 2 3, 1 2 3 occurred; 7 1 2 3 did not
    assert len(matched) == 3
    draft = best_path(tree, matched, max_tokens=8, factor=1.0, min_prob=0.1, depth=8)
    assert draft is not None and draft.match_len == 3
    # after "1 2 3": 4 twice, 9 once -> 4 at 2/3; after "1 2 3 4": 5 once, 6 once -> 1/2 (5: lower id on
    # a tie); then 1 for sure; three tokens: the factor (1 x the 3-token match) stops it there
    assert draft.tokens == [4, 5, 1] and draft.counts == [2, 1, 1]
    assert draft.probs == pytest.approx([2 / 3, 1 / 2, 1]) and draft.score == pytest.approx(2 / 3 + 1 / 3 + 1 / 3)
    # the factor caps the draft at factor x match length: a 1-token match drafts one token at factor 1
    short = best_path(tree, tree.matches([3]), max_tokens=8, factor=1.0, min_prob=0.0, depth=8)
    assert short is not None and short.tokens == [4]
    # a minimum probability above the path's product stops it
    assert best_path(tree, matched, 8, 1.0, 0.5, 8).tokens == [4]
    assert best_path(tree, matched, 8, 1.0, 0.9, 8) is None


# --- greedy on the tiny model -------------------------------------------------------------------------
CASES = [
    DecodeParams(method="suffix", draft_policy="fixed"),
    DecodeParams(method="suffix"),
    DecodeParams(method="suffix", suffix_source="request", suffix_max=4, suffix_factor=3.0, suffix_min_prob=0.0,
                 draft_policy="fixed"),
    DecodeParams(method="suffix", suffix_depth=4, draft_policy="fixed"),
    DecodeParams(method="suffix", suffix_mode="tree", draft_policy="fixed", suffix_min_prob=0.0, suffix_factor=3.0),
    DecodeParams(method="suffix", suffix_mode="tree"),
]


@pytest.mark.parametrize("params", CASES,
                         ids=lambda p: f"{p.suffix_source}-{p.suffix_mode}-{p.draft_policy}-d{p.suffix_depth}")
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
    assert len(memory) == 0  # a warm-up is no response: it never joins
    for i in range(2):
        assert len(memory) == i  # the second run finds the first one's response in the memory
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


def nodes_for_mb_inverse(nodes: int) -> float:
    """The --suffix-memory-mb that bounds a memory at ``nodes`` nodes."""
    return (nodes + 0.5) * BYTES_PER_NODE / 1_000_000


def kept_again(path, change) -> None:
    """Rewrite the memory file at ``path`` after ``change(kept)``, its digest made to match (a
    forged file, not a damaged one)."""
    kept = read_memory_file(path)
    change(kept)
    kept.digest = suffix_memory_module.digest(kept)
    path.write_bytes(msgspec.msgpack.encode(kept))


def test_the_memory_file_keeps_the_tree_and_reading_it_back_rebuilds_nothing(tmp_path, monkeypatch):
    family = tiny_family(fast=False)
    path = tmp_path / "memory.bin"
    memory = open_memory_file(family, str(path), 8)
    for i in range(6):
        memory.add(f"p{i}", [1, 2, 3, i, 1, 2, 3 + i, 9, i])
    memory.add("p0", [7, 7, 7])  # replaces p0's response: the tree has freed rows
    memory.save()
    reset_memories()

    def no_rebuild(*_):
        raise AssertionError("the tree was rebuilt")

    monkeypatch.setattr(SuffixTree, "append", no_rebuild)
    again = open_memory_file(family, str(path), 8)
    monkeypatch.undo()
    assert [e.tokens for e in again.entries.values()] == [e.tokens for e in memory.entries.values()]
    assert again.tree.substrings() == memory.tree.substrings() and again.nodes == memory.nodes
    again.add("q", [1, 2, 3, 5])  # the loaded tree grows and drafts as the built one does
    memory.add("q", [1, 2, 3, 5])
    assert again.tree.substrings() == memory.tree.substrings()
    drafts = [best_path(m.tree, m.tree.matches([0, 1, 2]), 8, 2.0, 0.0, 8) for m in (memory, again)]
    assert drafts[0] is not None and drafts[0] == drafts[1]
    reset_memories()
    deeper = open_memory_file(family, str(path), 12)  # another depth: built again from the responses
    assert [e.tokens for e in deeper.entries.values()] == [e.tokens for e in memory.entries.values()][:-1]


def test_a_damaged_forged_foreign_or_oversized_memory_file_is_refused_in_one_line_and_left_intact(tmp_path):
    family = tiny_family(fast=False)
    path = tmp_path / "memory.bin"
    memory = open_memory_file(family, str(path), 8)
    memory.add("p", [1, 2, 3, 1, 2])
    memory.save()
    kept = path.read_bytes()

    def refused(match: str, mb: float | None = None) -> None:
        before = path.read_bytes()
        reset_memories()
        with pytest.raises(DecodeError, match=match) as err:
            open_memory_file(family, str(path), 8, mb)
        assert "\n" not in str(err.value) and path.read_bytes() == before  # refused, never rewritten
        assert len(memory_for(family, 8)) == 0  # and the memory unchanged

    at = kept.index(read_memory_file(path).tree.arrays[FIELDS.index("count")]) + 4  # node 1's count
    path.write_bytes(kept[: len(kept) // 2])
    refused("is damaged or not a memory file")
    path.write_bytes(kept[:at] + bytes([kept[at] ^ 1]) + kept[at + 1:])  # one bit of the arrays flipped
    refused(r"is damaged \(its digest does not match what it holds\)")

    path.write_bytes(kept)
    kept_again(path, lambda k: setattr(k, "identity", "another model"))
    refused("was built for another model or tokenizer")

    path.write_bytes(kept)
    kept_again(path, lambda k: k.responses[0][1].__setitem__(0, 10**6))
    refused("holds token id 1000000, outside this tokenizer's 64 ids")

    def loop(k):  # a children list that comes back to its start
        nxt = array("i")
        nxt.frombytes(k.tree.arrays[FIELDS.index("next")])
        first = array("i")
        first.frombytes(k.tree.arrays[FIELDS.index("first")])
        nxt[first[0]] = first[0]
        k.tree.arrays[FIELDS.index("next")] = nxt.tobytes()

    path.write_bytes(kept)
    kept_again(path, loop)
    refused("its tree does not hold together")

    path.write_bytes(kept)
    refused(r"holds a tree of 1[0-9] nodes .*more than this memory's bound of 5 .*give a larger --suffix-memory-mb "
            r"\(at most 16384\)", mb=nodes_for_mb_inverse(5))
    path.write_bytes(kept)
    reset_memories()
    assert len(open_memory_file(family, str(path), 8)) == 1  # intact: read as it was


KEEP_ELSEWHERE = """
import sys
from decoders.core.errors import DecodeError
from decoders.methods.shared.suffix_memory import open_memory_file
from tests.support.engine import tiny_family
try:
    memory = open_memory_file(tiny_family(fast=False), sys.argv[1], 8)
except DecodeError as err:
    print(err)
    sys.exit(2)
memory.add("q", [4, 5, 6])
memory.save()
"""


@pytest.mark.slow  # a process of its own
def test_a_second_process_on_the_same_memory_file_is_told_who_keeps_it_and_nothing_is_lost(tmp_path):
    """Two runs (or datastore builds) on one memory file each read it, added their own responses
    and rewrote the whole file: the last to write kept only its own (issue 40's sweep); now the
    second is one line naming the first and its process, and writes nothing."""
    family = tiny_family(fast=False)
    path = tmp_path / "memory.bin"
    memory = open_memory_file(family, str(path), 8)
    memory.add("p", [1, 2, 3])
    memory.save()
    kept = path.read_bytes()
    second = run_python(KEEP_ELSEWHERE, str(path))
    said = second.stdout.strip()
    assert second.returncode == 2 and "\n" not in said, second.stdout + second.stderr
    assert said.startswith(f"The suffix memory {path} is being written by process {os.getpid()} (`"), said
    assert said.endswith("; wait for it to end, or give --suffix-memory another path"), said
    assert path.read_bytes() == kept
    memory.add("p2", [2, 3, 4])
    memory.save()
    reset_memories()  # this process is done with it: the next one may keep it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.bin"]  # no lock file left behind
    after = run_python(KEEP_ELSEWHERE, str(path))
    assert after.returncode == 0, after.stdout + after.stderr
    assert [prompt for prompt, _ in read_memory_file(path).responses] == ["p", "p2", "q"]


@pytest.mark.slow  # a process of its own
def test_a_save_killed_half_way_leaves_the_memory_whole_and_its_temporary_file_goes_at_the_next_start(tmp_path):
    """A run killed while it rewrote its memory (SIGKILL between the write and the rename) left
    the memory as it was, and a ``.tmp-memory.bin.PID.*`` beside it for good (issue 40's sweep):
    the next process to take the memory removes it, and no other file's."""
    family = tiny_family(fast=False)
    path = tmp_path / "memory.bin"
    memory = open_memory_file(family, str(path), 8)
    memory.add("p", [1, 2, 3])
    memory.save()
    reset_memories()
    kept = path.read_bytes()
    killed = run_python(KEEP_ELSEWHERE, str(path), kill_at="write:memory.bin")
    assert killed.returncode == -9, killed.stdout + killed.stderr
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-memory.bin.")]
    assert len(left) == 1 and path.read_bytes() == kept
    others = [f".tmp-notes.txt.{dead_pid()}.abcdef", ".tmp-mine"]  # not the memory's: left alone
    for name in others:
        (tmp_path / name).write_text("x")
    assert len(open_memory_file(family, str(path), 8)) == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")) == sorted(others)


def test_a_memory_in_a_folder_that_cannot_be_written_is_refused_in_one_line_before_it_is_used(tmp_path, monkeypatch):
    """A memory on a read-only file system was read, a whole run made, and then nothing written
    (issue 40's sweep); now it is refused before anything runs, naming the memory, not its lock."""
    import errno

    from decoders.records.atomic import write_error
    from decoders.records.folder import FolderLock

    path = tmp_path / "memory.bin"
    path.write_bytes(b"kept")

    def read_only(lock):
        raise write_error(lock.folder / lock.lock_name, OSError(errno.EROFS, os.strerror(errno.EROFS)), "the lock")

    monkeypatch.setattr(FolderLock, "acquire", read_only)
    with pytest.raises(DecodeError) as err:
        open_memory_file(tiny_family(fast=False), str(path), 8)
    assert str(err.value) == (f"the suffix memory {path} cannot be kept: its folder cannot be written (read-only "
                              "file system), and the memory is rewritten after each run; copy it to a writable "
                              "folder, or give --suffix-memory another path")
    assert path.read_bytes() == b"kept"


def test_a_memory_file_of_the_first_version_is_read_and_rebuilt(tmp_path):
    family = tiny_family(fast=False)
    ident, words = identity(family)
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "tui-decode suffix memory", "version": 1, "identity": ident, "model": words,
                                "responses": [["a", [1, 2, 3]], ["", [2, 3, 4]]]}))
    memory = open_memory_file(family, str(path), 8)
    assert [e.tokens for e in memory.entries.values()] == [[1, 2, 3], [2, 3, 4]]
    assert memory.tree.substrings()[(2, 3)] == (2, 1)
    memory.save()
    assert read_memory_file(path).version == 2 and read_memory_file(path).tree is not None


def test_a_finished_response_is_written_to_the_memory_file(tmp_path):
    engine = Engine(tiny_family(fast=False), pairing="sequential")
    path = tmp_path / "m.bin"
    open_memory_file(engine.family, str(path), 24)
    result = engine.run(PROMPT, DecodeParams(method="suffix", max_new_tokens=12))
    assert read_memory_file(path).responses == [(prompt_key(result.prompt_ids), result.method.ids)]


@pytest.mark.parametrize("pairing", ["interleaved", "sequential"])
def test_the_memory_is_added_to_and_written_after_the_runs_clock_stops(tmp_path, monkeypatch, pairing):
    """The response's joining the memory and the file's write are the session's work: a clock that
    jumps by 1000 s inside either leaves the run's wall time and its baseline's untouched."""
    offset = [0.0]

    def clock() -> float:
        return time.perf_counter() + offset[0]

    def slow(real):
        def run(self, *args, **kwargs):
            offset[0] += 1000.0
            return real(self, *args, **kwargs)
        return run

    monkeypatch.setattr(SuffixMemory, "save", slow(SuffixMemory.save))
    monkeypatch.setattr(SuffixMemory, "add", slow(SuffixMemory.add))
    monkeypatch.setattr(SuffixMemory, "forget", slow(SuffixMemory.forget))
    engine = Engine(tiny_family(fast=False), clock=clock, pairing=pairing)
    open_memory_file(engine.family, str(tmp_path / "m.bin"), 24)
    result = engine.run(PROMPT, DecodeParams(method="suffix", max_new_tokens=12))
    assert offset[0] >= 3000.0  # forgotten, added and written, once each
    assert read_memory_file(tmp_path / "m.bin").responses[0][1] == result.method.ids
    assert result.method.time_ms["wall"] < 100_000 and result.baseline.time_ms["wall"] < 100_000


# --- exact sampling ----------------------------------------------------------------------------------
V = 12
TEMPERATURE = 0.7
TOKENS, RUNS = 4, 1500
PROMPT_IDS = [5, 6, 7, 5, 6, 7, 5, 6, 7]  # repeats: the request's tree drafts "5 6 7" after "7"


TREE_PROMPT_IDS = [5, 6, 7, 5, 6, 8, 5, 6, 9, 5, 6, 7, 5, 6]  # after "5 6": 7, 8 or 9: a tree of three branches


def position_counts(runs: int = RUNS, mode: str = "path", prompt: list[int] = PROMPT_IDS) -> tuple[np.ndarray, int]:
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
                              suffix_factor=2.0, suffix_mode=mode, suffix_min_prob=0.0 if mode == "tree" else 0.1)
        main.reset()
        run = method.run(DecodeContext(family, prompt, params, main, None, time.perf_counter))
        while True:
            try:
                next(run)
            except StopIteration as stop:
                ids = stop.value.ids
                drafted += sum(len(it.draft) for it in stop.value.iters)
                break
        counts[np.arange(TOKENS), ids] += 1
    return counts, drafted


def worst_pvalue(counts: np.ndarray, prompt: list[int] = PROMPT_IDS) -> float:
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(V, V, generator=gen) * 1.5
    expected = marginals(target, prompt[-1], len(counts), TEMPERATURE).numpy()
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


@pytest.mark.slow
def test_tree_mode_sampling_emits_every_position_as_the_tempered_target_does():
    counts, drafted = position_counts(mode="tree", prompt=TREE_PROMPT_IDS)
    assert drafted > 2 * RUNS  # trees of several nodes every run
    assert worst_pvalue(counts, TREE_PROMPT_IDS) > 1e-3


def first_child_blindly(b, T, tree, gen, temperature, record):
    """A broken tree sampler: follows each node's first child without asking the target."""
    from decoders.backends.sampling import probs, sample
    from decoders.methods.shared.tree_step import TreeOutcome

    logits = T.run_tree(b.seq, tree)
    path, node = [], -1
    while True:
        kids = [i for i, p in enumerate(tree.parents) if p == node]
        if not kids:
            break
        path.append(kids[0])
        node = kids[0]
    T.keep_path(path)
    x = int(sample(probs(logits, temperature, greedy=False)[node + 1], gen))
    return TreeOutcome(path, x, [], [], "bonus" if path else "ar")


@pytest.mark.slow
def test_a_tree_sampler_that_follows_the_draft_blindly_is_caught(monkeypatch):
    monkeypatch.setattr(suffix_module, "_sample_tree", first_child_blindly)
    counts, _ = position_counts(mode="tree", prompt=TREE_PROMPT_IDS)
    assert worst_pvalue(counts, TREE_PROMPT_IDS) < 1e-8


def test_the_tree_draft_expands_the_likeliest_continuations_best_first():
    tree = SuffixTree(8)
    tree.add([1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 5, 6, 1, 2, 3, 7])
    matched = tree.matches([1, 2])
    draft = best_tree(tree, matched, max_tokens=4, factor=1.0, min_prob=0.2, depth=8)
    # after "1 2": 3 (3 of 4), 5 (1 of 4); after "1 2 3": 4 (2 of 3), 7 (1 of 3); factor 1 x the
    # 2-token match: two levels; 6 (under 5, 1/4) comes after 7 (pushed first) and does not fit
    assert draft is not None and draft.match_len == 2
    assert draft.tokens == [3, 4, 5, 7] and draft.parents == [-1, 0, -1, 0]
    assert draft.path_probs == pytest.approx([3 / 4, 1 / 2, 1 / 4, 1 / 4])
    assert draft.probs == pytest.approx([3 / 4, 2 / 3, 1 / 4, 1 / 3]) and draft.counts == [3, 2, 1, 1]
    assert draft.score == pytest.approx(7 / 4)
    path = best_path(tree, matched, 4, 1.0, 0.2, 8)  # its likeliest path is the path draft
    assert path is not None and path.tokens == [3, 4]
    assert best_tree(tree, matched, 8, 0.5, 0.0, 8).tokens == [3, 5]  # factor 0.5 x 2 tokens: one level
    assert best_tree(tree, matched, 8, 1.0, 0.3, 8).tokens == [3, 4]  # 5 and 7 fall below 0.3
    assert best_tree(tree, matched, 8, 2.0, 0.3, 8).tokens == [3, 4, 1, 2]  # four levels: "1 2 3 4" goes on


# --- the replay simulator ----------------------------------------------------------------------------
def test_the_replay_reproduces_the_steps_of_a_greedy_run_without_the_model():
    """The greedy run's own output replayed through the same trees drafts and accepts what the run
    did, step for step: the simulator is the method with the target's verdicts read from its output."""
    from decoders.bench.replay import ReplayParams, replay

    engine = Engine(tiny_family(fast=False), pairing="sequential")
    params = DecodeParams(method="suffix", max_new_tokens=40, draft_policy="fixed", suffix_max=6)
    other = engine.run(PROMPT.replace("w30", "w40"), params)  # an earlier request: it joins the memory
    result = engine.run(PROMPT, params)
    assert result.method.ids == result.baseline.ids
    records = replay([(other.prompt_ids, other.method.ids), (result.prompt_ids, result.method.ids)],
                     ReplayParams(max_draft=6))
    assert records[1].steps == len(result.method.iters)
    assert records[1].accepted == sum(it.n_accepted for it in result.method.iters)
    assert records[1].drafted == sum(len(it.draft) for it in result.method.iters)
    assert records[0].steps == len(other.method.iters)


def test_the_replay_never_drafts_a_requests_own_earlier_response():
    from decoders.bench.replay import ReplayParams, replay, totals

    response = [9, 8, 7, 6, 5, 4, 3, 2]
    same = replay([([1, 2], response), ([1, 2], response)], ReplayParams())
    assert same[1].accepted == 0  # the second is the same prompt: the first's response was forgotten
    other = replay([([1, 2], response), ([1, 3], response)], ReplayParams(factor=4.0))
    # step 1: "3" continues with 2 in the memory: refused, 9 emitted; step 2: "9" drafts 8 7 6 5 (four
    # tokens: factor 4 x a 1-token match), all accepted, and 4; step 3: one token left to draft: 3, and 2
    second = other[1]
    assert (second.steps, second.drafted, second.accepted, second.from_memory) == (3, 6, 5, 5)
    assert second.by_position[:4] == [[3, 2], [1, 1], [1, 1], [1, 1]] and second.tau == pytest.approx(8 / 3)
    assert second.cost == pytest.approx(3 + 0.05 * 6) and totals(other).tokens == 16


# --- the datastore -----------------------------------------------------------------------------------
def test_a_datastore_is_built_from_text_documents_and_a_bad_jsonl_line_is_named(tmp_path, monkeypatch):
    import decoders.training.datastore as datastore_module
    from decoders.training.datastore import build, documents

    family = tiny_family(fast=False)
    text = tmp_path / "c.txt"
    text.write_text("w10 w11 w12\n\nw20 w21\nw22\n\n\n")
    docs = documents(text, family)
    assert len(docs) == 2 and docs[0] == list(family.tokenizer("w10 w11 w12", add_special_tokens=False)["input_ids"])
    memory = SuffixMemory(depth=6)
    report = build(memory, docs, tmp_path / "m.bin")
    assert (report.documents, report.responses, report.tokens) == (2, 2, sum(map(len, docs)))
    assert report.nodes == memory.nodes > 1 and report.file_bytes == (tmp_path / "m.bin").stat().st_size
    monkeypatch.setattr(datastore_module, "MAX_RESPONSE_TOKENS", 3)
    monkeypatch.setattr(suffix_memory_module, "MAX_RESPONSE_TOKENS", 3)
    report = build(SuffixMemory(depth=6), [[1, 2, 3, 4, 5], [1, 2]], tmp_path / "n.bin")
    assert (report.tokens, report.cut) == (5, 1)  # what joined, and the documents cut (the count said 7, none cut)
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"text": "w10"}\n{"title": "w11"}\n')
    with pytest.raises(DecodeError, match="line 2 of the corpus .* has none of the text fields text, response"):
        documents(bad, family)
