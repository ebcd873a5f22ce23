"""Methods that verify a tree of guesses in one forward (lookahead decoding, prompt lookup with
several branches): greedy output equals the baseline, and each iteration's tree record accepts
exactly one root-to-node path."""

from __future__ import annotations

import pytest
import torch

from decoders.backends.tree import TokenTree
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.methods.lookahead import NgramPool, Window
from decoders.methods.shared.ngram import NgramIndex
from decoders.methods.shared.tree_step import tree_statuses
from decoders.records.run import RunResult
from tests.support.engine import PROMPT, tiny_family
from tests.support.prompts import prompt

TREE_CASES = [
    DecodeParams(method="lookahead"),
    DecodeParams(method="lookahead", window=1, ngram_size=2, verify_branches=1, draft_policy="fixed"),
    DecodeParams(method="lookahead", window=6, ngram_size=5, verify_branches=8, record=False, draft_policy="fixed"),
    DecodeParams(method="lookahead", verify_branches=0, draft_policy="fixed"),
    DecodeParams(method="pld", branches=3),
    DecodeParams(method="pld", branches=4, num_pred=5, draft_policy="fixed"),
    DecodeParams(method="pld", branches=8, num_pred=3, ngram_min=2, ngram_max=4, draft_policy="fixed"),
]


def _id(p: DecodeParams) -> str:
    if p.method == "lookahead":
        return f"lookahead-W{p.window}-N{p.ngram_size}-G{p.verify_branches}-{p.draft_policy}"
    return f"pld-B{p.branches}-{p.draft_policy}"


@pytest.mark.parametrize("params", TREE_CASES, ids=_id)
def test_tree_methods_emit_exactly_the_baseline(engine, params):
    result = engine.run(PROMPT, params.replace(max_new_tokens=40))
    assert result.method.ids == result.baseline.ids
    assert result.summary.identical is True and len(result.method.ids) == 40


def check_tree_record(it) -> tuple[bool, int]:
    """The iteration's draft rows are a tree whose accepted rows are one root-to-node path, judged
    rows hang from the root or that path, and the emitted tokens are the path and one more.
    Returns (whether the tree branches, accepted count)."""
    rows = it.draft
    parents = [row.parent for row in rows]
    tree = TokenTree(tuple(row.token for row in rows), tuple(parents))  # parents before children
    path = [i for i, row in enumerate(rows) if row.status == "acc"]
    assert tree.is_path(path), (parents, [row.status for row in rows])
    assert [row.status for row in rows] == tree_statuses(parents, path)
    assert [e.token for e in it.emit][:len(path)] == [rows[i].token for i in path]
    assert len(it.emit) == len(path) + 1 or it.emit[-1].kind != "acc"  # a budget or stop cut aside
    siblings = [tuple(row.token for row, p in zip(rows, parents, strict=False) if p == parent) for parent in set(parents)]
    assert all(len(s) == len(set(s)) for s in siblings), "equal siblings: the trie did not merge them"
    kinds = [e.kind for e in it.emit]
    assert kinds[:len(path)] == ["acc"] * len(path)
    if not rows:
        assert kinds == ["ar"]
    branches = any(len(s) > 1 for s in siblings)
    return branches, len(path)


@pytest.mark.parametrize("params", [DecodeParams(method="lookahead", window=5, ngram_size=3, verify_branches=5,
                                                 draft_policy="fixed"),
                                    DecodeParams(method="pld", branches=4, num_pred=4, draft_policy="fixed")],
                         ids=["lookahead", "pld-branches"])
def test_tree_records_accept_one_path(params):
    result = Engine(tiny_family(fast=True)).run(PROMPT, params.replace(max_new_tokens=60))
    seen = [check_tree_record(it) for it in result.method.iters]
    assert any(b for b, _ in seen), "no iteration verified a branching tree"
    assert any(n > 0 for _, n in seen) and any(n == 0 for b, n in seen if b)
    statuses = {row.status for it in result.method.iters for row in it.draft}
    assert {"acc", "rej", "unv"} <= statuses
    assert result.summary.tau > 1


def test_lookahead_detail_counts_the_pool_and_round_trips(tmp_path):
    engine = Engine(tiny_family(fast=False))
    result = engine.run(PROMPT, DecodeParams(method="lookahead", pool="window", draft_policy="fixed", max_new_tokens=30))
    steps = [it.detail for it in result.method.iters]
    assert all(s.kind == "lookahead" for s in steps)
    assert steps[0].pool == 0 and steps[0].hits == 0  # nothing collected before the first window ran
    # the pool grows by what each window added, less what the cap of G per key pushed out
    assert all(b.pool <= a.pool + a.added and b.pool >= a.pool for a, b in zip(steps, steps[1:], strict=False))
    assert steps[1].pool == steps[0].added > 0
    assert any(s.hits for s in steps) and all(s.hits <= 4 for s in steps)
    assert all(s.accepted == it.n_accepted for s, it in zip(steps, result.method.iters, strict=False))
    assert all(len(s.window) == 2 and all(len(level) == 4 for level in s.window) for s in steps)
    ex = result.summary.extras
    assert ex["pool_size"] == steps[-1].pool + steps[-1].added and 0 < ex["pool_hit_rate"] <= 1
    loaded = RunResult.load(result.save(tmp_path / "run.json"))
    assert [it.detail for it in loaded.method.iters] == steps
    pld = engine.run(PROMPT, DecodeParams(method="pld", branches=3, max_new_tokens=30))
    trees = [it.detail for it in pld.method.iters if it.detail is not None]
    assert trees and all(t.kind == "lookup_tree" and len(t.starts) == len(t.n) <= 3 for t in trees)
    loaded = RunResult.load(pld.save(tmp_path / "pld.json"))
    assert [it.detail for it in loaded.method.iters if it.detail] == trees
    assert [it.draft for it in loaded.method.iters] == [it.draft for it in pld.method.iters]


def test_lookahead_pool_from_the_text_verifies_the_prompts_ngrams_from_the_first_step():
    """A target that walks a cycle of ten tokens, and a prompt that holds the cycle once: every
    n-gram the output needs is in the prompt. The text's continuation is verified from the first
    step; the window pool starts empty."""
    from tests.support.bigram import bigram_family

    cycle = list(range(4, 14))
    table = torch.full((20, 20), -5.0)
    for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=False):
        table[a, b] = 5.0
    engine = Engine(bigram_family(table, table))
    prompt_text = " ".join(f"w{t}" for t in cycle + [4])
    params = DecodeParams(method="lookahead", chat_template=False, max_new_tokens=21)
    text = engine.run(prompt_text, params)
    window = engine.run(prompt_text, params.replace(pool="window"))
    assert text.method.ids == text.baseline.ids == window.method.ids == (cycle[1:] + cycle[:1]) * 2 + [5]
    steps = [it.detail for it in text.method.iters]
    # the window's pool starts empty; the text's continuation of its last 3-gram is verified
    assert steps[0].pool == 0 and steps[0].hits == 1
    assert [it.n_accepted for it in text.method.iters] == [2] * 7  # N - 1 = 2 of the text's continuation, every step
    assert window.method.iters[0].detail.hits == 0 and window.method.iters[0].n_accepted == 0
    assert text.summary.tau == 3.0 > window.summary.tau
    # every accepted candidate was the text's own continuation; with --pool window, the window's
    assert {it.detail.source for it in text.method.iters} == {"text"} and text.summary.extras["window_share"] == 0.0
    # fixed: every pool n-gram verified (the adaptive run after the first reads a measured, timing-
    # dependent cost curve, and may verify none)
    window = engine.run(prompt_text, params.replace(pool="window", draft_policy="fixed"))
    assert window.summary.extras["window_share"] == 1.0
    assert {it.detail.source for it in window.method.iters if it.n_accepted} == {"window"}
    # a window that gave nothing is named as the cost it was, with what does the same without it
    assert "the window's n-grams gave 0% of the accepted tokens" in text.summary.explanation
    assert "prompt lookup verifies the text's continuations" in text.summary.explanation
    assert "window's n-grams gave" not in window.summary.explanation
    assert "pool from the window only" in window.method.label and "pool" not in text.method.label


def test_lookahead_candidates_put_the_texts_continuation_first_then_the_pools():
    from decoders.methods.lookahead import WINDOW_KEY, candidates

    seq = [1, 2, 3, 9, 8, 1, 2, 3]  # the tail 3-gram 1 2 3 occurred before, followed by 9 8
    pool = NgramPool(4)
    for continuation in ((9, 8), (4, 5), (9,), (6, 7)):
        pool.add(3, continuation)
    paths, keys = candidates(NgramIndex(1, 3, seq), pool, seq, 2, 3)
    # (9,) and (9, 8) start as the text's continuation: nothing new; the most recent pool n-grams next
    assert paths == [[9, 8], [6, 7], [4, 5]] and keys == [3, WINDOW_KEY, WINDOW_KEY]
    assert candidates(None, pool, seq, 1, 2) == ([[6], [9]], [WINDOW_KEY, WINDOW_KEY])  # cut to k = 1 token
    assert candidates(NgramIndex(1, 3, seq), pool, seq, 2, 0) == ([], [])  # G = 0: the window alone
    assert candidates(NgramIndex(1, 3, seq), NgramPool(2), seq, 2, 1) == ([[9, 8]], [3])


def test_adaptive_lookahead_stops_verifying_candidates_that_do_not_pay():
    """Where a wide forward is dear and the tiny model's pool n-grams are mostly refused, the
    adaptive budget leaves them out (a plain step beside the window) after it has learned so;
    fixed verifies every candidate offered. The output is the same."""
    steep = [1.0] + [2.0 + k for k in range(15)]  # each position past the window costs a step
    engine = Engine(tiny_family(fast=True))
    engine.known_cost_curve = lambda length: steep
    params = DecodeParams(method="lookahead", window=1, verify_branches=2, max_new_tokens=40)
    adaptive = engine.run(PROMPT, params)
    fixed = engine.run(PROMPT, params.replace(draft_policy="fixed"))
    assert adaptive.method.ids == fixed.method.ids == adaptive.baseline.ids
    offered = [it for it in fixed.method.iters[1:] if it.detail.hits]
    assert offered and all(it.draft for it in offered)
    left_out = [it for it in adaptive.method.iters[1:] if it.detail.hits and not it.draft]
    assert len(left_out) >= len([it for it in adaptive.method.iters[1:] if it.detail.hits]) // 2


def test_lookahead_narrows_its_shape_where_wide_forwards_cost_and_keeps_it_where_they_do_not():
    """Adaptive: W and G are caps. A CPU-like curve (T(16) about 3) narrows to one window column
    and one candidate; a GPU-like flat curve keeps the caps; fixed keeps them whatever the cost."""
    from decoders.methods.shared.lookahead_shape import choose

    cpu = [1.0, 1.48, 1.57, 1.76, 1.87, 2.03, 2.16, 2.17, 2.25, 2.43, 2.7, 2.78, 2.95, 2.96, 3.07, 3.3]
    gpu = [1.0 + 0.003 * k for k in range(16)]
    narrow = choose(4, 4, 3, cpu)
    assert (narrow.window, narrow.branches, narrow.positions) == (1, 1, 4) and narrow.cost == 1.76
    assert narrow.reason == ("narrowed from W=4, G=4: a 16-token forward costs T(16) = 3.30 one-token steps, a "
                             "4-token one T(4) = 1.76 (the measured verify-cost curve)")
    wide = choose(4, 4, 3, gpu)
    assert (wide.window, wide.branches) == (4, 4) and wide.reason.startswith("as given, the most tokens per cost: its 16-token forward costs T(16) = 1.04")
    flat = [1.0] * 16
    assert (choose(8, 6, 3, flat).window, choose(8, 6, 3, flat).branches) == (8, 6)  # caps beyond the ladder
    assert (choose(4, 4, 3, cpu, adaptive=False).window, choose(4, 4, 3, cpu, adaptive=False).branches) == (4, 4)
    assert (choose(1, 0, 3, cpu).window, choose(1, 0, 3, cpu).branches) == (1, 0)  # never above the caps
    assert (choose(4, 4, 3, None, device="cuda").window, choose(4, 4, 3, None, device="cuda").branches) == (4, 4)
    assert "a prior cost slope" in choose(4, 4, 3, None).reason


def test_adaptive_lookahead_says_which_shape_it_ran_and_stays_exact():
    engine = Engine(tiny_family(fast=True))
    result = engine.run(PROMPT, DecodeParams(method="lookahead", max_new_tokens=30))  # no curve yet: the prior slope
    assert result.method.ids == result.baseline.ids
    steps = [it.detail for it in result.method.iters]
    assert steps[0].shape.startswith("W=1, G=1: narrowed from W=4, G=4") and all(not s.shape for s in steps[1:])
    assert all(len(s.window[0]) == 1 for s in steps) and all(s.hits <= 1 for s in steps)
    assert result.method.label == "Lookahead (W≤4→1, N=3, G≤4→1)"  # the caps asked for, and what ran
    assert result.summary.extras["shape"] == "W=1, G=1 (narrowed from W=4, G=4)"
    assert "lookahead decoding emitted" in result.summary.explanation and "held a candidate for the last token" in result.summary.explanation
    assert "shape W=1, G=1 (narrowed from W=4, G=4)" in result.summary.explanation
    fixed = engine.run(PROMPT, DecodeParams(method="lookahead", draft_policy="fixed", max_new_tokens=30))
    assert fixed.method.ids == result.method.ids and fixed.method.label == "Lookahead (W=4, N=3, G=4, fixed shape)"
    assert fixed.method.iters[0].detail.shape.startswith("W=4, G=4: fixed")
    assert fixed.summary.extras["shape"] == "W=4, G=4 (fixed)"


def test_one_branch_is_linear_prompt_lookup():
    engine = Engine(tiny_family(fast=False))
    plain = engine.run(PROMPT, DecodeParams(method="pld", draft_policy="fixed", max_new_tokens=30)).method
    one = engine.run(PROMPT, DecodeParams(method="pld", draft_policy="fixed", branches=1, max_new_tokens=30)).method
    assert one.label == plain.label and [it.draft for it in one.iters] == [it.draft for it in plain.iters]
    assert all(it.detail is None or it.detail.kind == "lookup" for it in one.iters)


def test_window_is_a_tree_at_the_right_positions():
    """Level j, column i guesses position n_past + j + i: depth i + j - 1 below the last token."""
    levels = [[100, 101, 102, 103], [110, 111, 112, 113], [120, 121, 122, 123]]
    tokens, parents, last = Window(levels).tree_nodes()
    tree = TokenTree(tuple(tokens), tuple(parents))
    where = {t: (t // 10 % 10, t % 10) for t in tokens}  # token -> (level, column)
    for node, token in enumerate(tokens):
        j, i = where[token]
        assert tree.depth[node] == j + i - 1
        chain = [where[tokens[k]] for k in tree.path(node)]  # level 0 up to column i, then column i upward
        assert chain == [(0, c) for c in range(1, i + 1)] + [(lv, i) for lv in range(1, j + 1)]
    assert [tokens[n] for n in last] == levels[-1]
    assert Window([[7, 8, 9]]).tree_nodes()[2] == [-1, 0, 1]  # N = 2: column 0's last level is the root


def test_window_advance_keeps_absolute_positions():
    w = Window([[1, 2, 3, 4], [5, 6, 7, 8]])
    w.advance([9, 10, 11, 12], moved=1, fill=lambda: 0)
    assert w.levels == [[5, 6, 7, 8], [9, 10, 11, 12]]
    w.advance([13, 14, 15, 16], moved=3, fill=lambda: 0)
    assert w.levels == [[11, 12, 0, 0], [15, 16, 0, 0]]


def test_pool_keeps_the_most_recent_distinct_ngrams():
    pool = NgramPool(cap=2)
    assert pool.add(1, (2, 3)) and pool.add(1, (4, 5)) and not pool.add(1, (2, 3))
    assert pool.get(1, 5) == [(2, 3), (4, 5)]
    assert pool.add(1, (6, 7)) and pool.get(1, 5) == [(6, 7), (2, 3)] and pool.size == 2
    assert pool.get(9, 5) == [] and pool.get(1, 1) == [(6, 7)]


def test_lookup_many_starts_with_the_linear_draft_and_keeps_branches_distinct():
    seq = [1, 2, 3, 4, 9, 1, 2, 3, 5, 6, 1, 2, 3, 4, 7, 8, 1, 2, 3]
    index = NgramIndex(1, 3, seq)
    linear = index.lookup(3)
    found = index.lookup_many(3, 5)
    assert found[0] == linear
    drafts = [d for d, _, _ in found]
    assert drafts[:3] == [[4, 7, 8], [5, 6, 1], [4, 9, 1]]
    assert all(not a[:len(b)] == b for i, a in enumerate(drafts) for j, b in enumerate(drafts) if i != j)
    # the most recent match is cut short by the end of the text; linear lookup prefers a full one
    short = NgramIndex(1, 3, [1, 2, 3, 4, 9, 8, 5, 1, 2, 3, 1, 2, 3])
    assert [d for d, _, _ in short.lookup_many(4, 2)] == [[4, 9, 8, 5], [1, 2, 3]]
    assert index.lookup_many(3, 1) == [linear] and NgramIndex(1, 2, [5, 6]).lookup_many(3, 4) == []


@pytest.mark.parametrize("params", [DecodeParams(method="lookahead"), DecodeParams(method="pld", branches=4)],
                         ids=["lookahead", "pld-branches"])
def test_bundled_model_tree_methods_are_exact(smollm2, params):
    torch.manual_seed(0)
    result = Engine(smollm2).run(prompt(241), params.replace(max_new_tokens=24))
    assert result.summary.identical is True, result.summary.first_divergence
    assert result.method.ids == result.baseline.ids and len(result.method.ids) == 24


# -- speculative decoding with a draft tree ------------------------------------------------------
@pytest.mark.parametrize("params", [DecodeParams(method="spec", tree_width=3, tree_depth=2),
                                    DecodeParams(method="spec", gamma=6, tree_width=8, tree_depth=6),
                                    DecodeParams(method="spec", gamma=1, tree_width=2, tree_depth=1, record=False)],
                         ids=["w3d2", "w8d6", "g1"])
def test_spec_draft_tree_emits_exactly_the_baseline(engine, params):
    result = engine.run(PROMPT, params.replace(max_new_tokens=40))
    assert result.method.ids == result.baseline.ids
    assert result.summary.identical is True and len(result.method.ids) == 40
    assert "tree" in result.method.label


def test_spec_draft_tree_beats_the_linear_draft_at_equal_target_forwards():
    """The tree holds the linear draft, so each step accepts at least as much; with a noisy helper
    its alternatives catch some of the chain's refusals: more tokens per target forward."""
    family = tiny_family(fast=True, helper_noise=0.15)
    engine = Engine(family)
    linear = engine.run(PROMPT, DecodeParams(method="spec", gamma=4, max_new_tokens=60))
    tree = engine.run(PROMPT, DecodeParams(method="spec", gamma=4, tree_width=4, tree_depth=4, max_new_tokens=60))
    assert tree.method.ids == linear.method.ids == linear.baseline.ids
    assert tree.summary.tau > linear.summary.tau + 0.1, (tree.summary.tau, linear.summary.tau)
    seen = [check_tree_record(it) for it in tree.method.iters]
    assert any(b for b, _ in seen)
    # some iteration accepted a node off the chain: a sibling of a chain token
    assert any(row.status == "acc" and i >= 4 for it in tree.method.iters for i, row in enumerate(it.draft))
    assert all(row.q is not None and 0 <= row.q <= 1 for it in tree.method.iters for row in it.draft)


def test_spec_draft_tree_in_sampling_mode_stays_linear():
    engine = Engine(tiny_family(fast=True))
    params = DecodeParams(method="spec", mode="sampling", temperature=0.7, seed=3, max_new_tokens=24)
    linear = engine.run(PROMPT, params)
    asked = engine.run(PROMPT, params.replace(tree_width=4))
    assert asked.method.ids == linear.method.ids
    assert all(row.parent == -1 or row.parent == i - 1 for it in asked.method.iters for i, row in enumerate(it.draft))
    assert "linear: a draft tree needs greedy mode" in asked.method.label


def test_a_draft_tree_makes_no_linear_prediction_and_an_adaptive_run_predicts_at_what_it_drafted():
    """Theorem 3.8 assumes one linear draft of gamma tokens every iteration: a tree gets no
    prediction (not alpha 0 and 0.2x), and an adaptive run is predicted at its mean drafted length,
    its plain steps counted in the sentence."""
    engine = Engine(tiny_family(fast=True, helper_noise=0.15))
    tree = engine.run(PROMPT, DecodeParams(method="spec", gamma=4, tree_width=2, tree_depth=2, max_new_tokens=30))
    x = tree.summary.extras
    assert x["tree"] == "2x2" and "predicted_speedup" not in x and "alpha_hat" not in x and "curve" not in x
    assert "no prediction is made for a tree" in tree.summary.explanation
    # the tree's own accounting instead: what a drafting iteration cost, measured, against its tokens
    drafting = [it for it in tree.method.iters if it.draft]
    target = tree.summary.target_fwd_ms
    draft_cost = sum(it.t_draft_ms for it in drafting) / len(drafting) / target
    verify_cost = sum(it.t_verify_ms for it in drafting) / len(drafting) / target
    assert x["tree_draft_cost"] == pytest.approx(draft_cost, abs=1e-3)
    assert x["tree_verify_cost"] == pytest.approx(verify_cost, abs=1e-3)
    ratio = tree.summary.tau / (x["tree_draft_cost"] + x["tree_verify_cost"])
    verdict = "outweighed its cost" if ratio > 1.0 else "fell short of its cost"
    assert f"{ratio:.2f} tokens per step's cost, so its tokens {verdict}" in tree.summary.explanation
    result = engine.run(PROMPT, DecodeParams(method="spec", gamma=6, max_new_tokens=40))
    run = result.summary
    lengths = [len(it.draft) for it in result.method.iters if it.draft]
    assert run.extras["mean_drafted"] == round(sum(lengths) / len(lengths), 2)
    assert run.extras["gamma_used"] == max(1, min(6, round(sum(lengths) / len(lengths))))
    assert f"{len(lengths)} iterations drafted {run.extras['mean_drafted']:.1f} tokens on average" in run.explanation
    fixed = engine.run(PROMPT, DecodeParams(method="spec", gamma=6, draft_policy="fixed", max_new_tokens=40)).summary
    assert fixed.extras["gamma_used"] == 6
