"""Lookahead decoding (Fu et al. 2024): Jacobi iterations feed an n-gram pool; the pool's n-grams
that start with the last token are verified, several at once, in the same forward.

Each step runs one target forward over a token tree (`decoders.methods.shared.tree_step`):

- the verification branch: up to G candidates of N-1 tokens merged into a trie (shared prefixes
  run once). With ``--pool text`` (the default) the first is the text's own continuation of its
  longest matching n-gram, prompt and output, as prompt lookup matches; then the pool's n-grams
  whose key is the last emitted token. With the adaptive policy the trie is cut to the nodes
  that pay for their positions beside the window (`decoders.methods.shared.tree_budget`), their
  acceptance learned per kind (a text match of each length, a window n-gram);
- the lookahead branch, a 2-D Jacobi window of N-1 levels x W columns. Level j, column i guesses
  the token at ``n_past + j + i`` (``n_past`` the position of the last emitted token). It is a
  tree too, the shape of llama.cpp's ``examples/lookahead`` sequences: level 0 is a chain (its
  column 0 is the last emitted token itself), and column i's higher levels hang below level 0's
  column i, each level under the one before. So column i's last level sees the prefix, level 0's
  columns 1..i and column i's levels above 0: the n-gram trajectory it extends.

The target's argmax at the last level gives a new level; every column then yields one n-gram
(its N-1 levels and the new token) for the pool, and the levels shift up. Greedy acceptance is
`accept_tree` over the verification branch only, so the output is the autoregressive output.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Annotated

from decoders.core.declarations import BenchTarget, Figure, Method, ParamSpec, register
from decoders.methods.shared.common import DecodeContext, MethodGen, RunBuilder, ms
from decoders.methods.shared.draft_policy import DRAFT_POLICY, AdaptiveDraftLength
from decoders.methods.shared.lookahead_shape import choose, swept
from decoders.methods.shared.lookup_tree import branch_of
from decoders.methods.shared.ngram import NgramIndex
from decoders.methods.shared.tree_budget import AlternativeRates, budget
from decoders.methods.shared.tree_step import commit_tree, verify_tree, with_extra
from decoders.records.bounds import Count, Label, PerStep, TokenText
from decoders.records.run import Detail, register_detail

WINDOW = ParamSpec("window", "W window", "lookahead: Jacobi window width (positions guessed ahead per level)", 4,
                   low=1, high=32, metavar="W", symbol="w")
NGRAM_SIZE = ParamSpec("ngram_size", "N n-gram size", "lookahead: n-gram length (the window keeps N-1 levels)", 3,
                       low=2, high=8, metavar="N")
VERIFY_BRANCHES = ParamSpec("verify_branches", "G branches", "lookahead: candidates verified per step (the text's "
                            "continuation, then the pool's n-grams; 0: the window alone)", 4,
                            low=0, high=32, metavar="G")
POOL = ParamSpec("pool", "n-gram pool", "lookahead: 'text' also verifies the text's own continuation of its last "
                 "n-gram, from the prompt and the output (LookaheadDecoding's POOL_FROM_PROMPT, matched as prompt "
                 "lookup matches); 'window' only the Jacobi window's n-grams", "text", kind="choice",
                 choices=("text", "window"))
TEXT_NGRAM = 3  # the longest n-gram of the text matched against its tail (prompt lookup's default)
IDLE_WINDOW = 0.05  # below this share of the accepted tokens the explanation calls the window idle
WINDOW_KEY = 0  # the acceptance key of the window's n-grams (a text match's key is its length, 1..)


@register_detail
class LookaheadStep(Detail, tag="lookahead"):
    """The pool before the step, the n-grams it offered for the last token, what was accepted,
    and the Jacobi window that ran (the tree of candidates is the iteration's draft rows)."""

    pool: Count  # the window's n-grams in the pool before this step
    hits: Count  # candidates offered for the last token: the text's continuation, the pool's n-grams
    # (the adaptive policy verifies those that pay for their positions: the iteration's draft rows)
    accepted: Count  # tokens of the verification branch accepted
    # level by level, the guesses that ran (level 0's column 0 is the last token)
    window: Annotated[list[Annotated[list[TokenText], PerStep]], PerStep]
    added: Count  # n-grams this step's window added to the pool that it did not hold
    shape: Label = ""  # the run's W and G and why (`lookahead_shape.choose`); the first step only
    source: Label = ""  # where the accepted candidate came from: "text", "window", "" (none accepted)


class NgramPool:
    """For each key token, the most recent distinct continuations (N-1 tokens), at most ``cap``."""

    def __init__(self, cap: int):
        self.cap = max(1, cap)
        self._by_key: dict[int, OrderedDict[tuple[int, ...], None]] = {}
        self.size = 0

    def add(self, key: int, continuation: tuple[int, ...]) -> bool:
        """Add (or refresh) an n-gram; True when it was not held."""
        entries = self._by_key.setdefault(key, OrderedDict())
        if continuation in entries:
            entries.move_to_end(continuation)
            return False
        entries[continuation] = None
        self.size += 1
        if len(entries) > self.cap:
            entries.popitem(last=False)
            self.size -= 1
        return True

    def get(self, key: int, count: int) -> list[tuple[int, ...]]:
        """Up to ``count`` continuations of ``key``, the most recent first."""
        entries = self._by_key.get(key)
        return list(reversed(entries))[:count] if entries else []


class Window:
    """The 2-D Jacobi window: ``levels[j][i]`` guesses position ``n_past + j + i``."""

    def __init__(self, levels: list[list[int]]):
        self.levels = levels
        self.n_levels, self.width = len(levels), len(levels[0])

    def tree_nodes(self) -> tuple[list[int], list[int], list[int]]:
        """Tokens and parents of the window's nodes (parents numbered among them, -1 the root),
        and for each column the node of its last level (-1: the root itself, when N = 2 and
        the column is 0)."""
        index: dict[tuple[int, int], int] = {(0, 0): -1}  # level 0, column 0 is the last emitted token
        tokens: list[int] = []
        parents: list[int] = []
        for j in range(self.n_levels):
            for i in range(self.width):
                if (j, i) == (0, 0):
                    continue
                parent = index[(0, i - 1)] if j == 0 else index[(j - 1, i)]
                index[(j, i)] = len(tokens)
                tokens.append(self.levels[j][i])
                parents.append(parent)
        last = [index[(self.n_levels - 1, i)] for i in range(self.width)]
        return tokens, parents, last

    def ngrams(self, new_level: list[int]) -> list[tuple[int, tuple[int, ...]]]:
        """(key, continuation) for each column: its levels, then the new token."""
        return [(self.levels[0][i], tuple(self.levels[j][i] for j in range(1, self.n_levels)) + (new_level[i],))
                for i in range(self.width)]

    def advance(self, new_level: list[int], moved: int, fill) -> None:
        """Shift the levels up (the new level last), then the columns left by ``moved - 1`` so that
        each guess keeps its absolute position after ``moved`` tokens were emitted; ``fill()``
        guesses the columns that come in on the right."""
        levels = self.levels[1:] + [list(new_level)]
        drop = min(max(moved - 1, 0), self.width)
        if drop:
            levels = [level[drop:] + [fill() for _ in range(drop)] for level in levels]
        self.levels = levels


def lookahead(ctx: DecodeContext) -> MethodGen:
    import torch

    from decoders.backends.tree import TokenTree

    params, T = ctx.params, ctx.main
    N = params.ngram_size
    shape = choose(params.window, params.verify_branches, N, ctx.cost_curve, ctx.family.device.type,
                   adaptive=params.draft_policy == "adaptive")
    W, G = shape.window, shape.branches
    b = RunBuilder(ctx, "lookahead", run_label(params, W, G))
    disp = ctx.family.display
    gen = torch.Generator().manual_seed(params.seed)
    source = list(ctx.prompt_ids)

    def fill() -> int:  # a token of the prompt, at random: a better guess than a random id
        return source[int(torch.randint(len(source), (1,), generator=gen))]

    window = Window([[fill() for _ in range(W)] for _ in range(N - 1)])
    pool = NgramPool(max(G, 1))
    # the text's own continuation of its last n-gram, matched as prompt lookup matches
    index = NgramIndex(1, TEXT_NGRAM, b.seq) if params.pool == "text" else None
    policy = AdaptiveDraftLength(N - 1, ctx.cost_curve) if params.draft_policy == "adaptive" else None
    alternatives = AlternativeRates()

    while not b.done:
        k = min(N - 1, b.remaining - 1)
        paths, keys = candidates(index, pool, b.seq, k, G)
        window.levels[0][0] = b.seq[-1]
        w_tokens, w_parents, w_last = window.tree_nodes()
        offered = len(paths)
        if policy is not None and paths:
            verify, paths = budget(paths, keys, policy, alternatives, len(w_tokens))
            keys = [key for key, path in zip(keys, paths, strict=False) if path]
            paths = [path for path in paths if path]
        else:
            verify = TokenTree.from_paths(paths)
        tree, first_extra = with_extra(verify, w_tokens, w_parents)
        pool_before = pool.size
        outcome = verify_tree(b, T, tree, len(verify), record=params.record)
        accepted = [verify.tokens[i] for i in outcome.path]
        followed = branch_of(paths, accepted)
        if policy is not None and T.log[-1].positions == len(tree) + 1:  # a decode forward, not the prefill
            i = max(followed, 0)
            policy.observe(keys[i] if paths else None, len(paths[i]) if paths else 0, len(accepted),
                           len(tree) + 1, T.log[-1].seconds)
            alternatives.observe(verify.parents, outcome.path)
        new_level = [outcome.best[0 if node < 0 else 1 + first_extra + node] for node in w_last]
        added = sum(pool.add(key, cont) for key, cont in window.ngrams(new_level))
        detail = LookaheadStep(pool=pool_before, hits=offered, accepted=len(outcome.path),
                               window=[[disp(t) for t in level] for level in window.levels], added=added,
                               shape="" if b.iters else f"{shape.text()}: {shape.reason}",
                               source="" if followed < 0 else "window" if keys[followed] == WINDOW_KEY else "text")
        it = commit_tree(b, tree, outcome, t_verify_ms=ms(T.log[-1].seconds), detail=detail)
        window.advance(new_level, len(it.emit), fill)
        if index is not None:
            index.extend(b.seq[len(index.seq):])
        yield from b.yielding(it)
    return b.finish_run({"main": T})


def candidates(index: NgramIndex | None, pool: NgramPool, seq: list[int], k: int,
               branches: int) -> tuple[list[list[int]], list[int]]:
    """Up to ``branches`` candidate continuations of ``seq`` (``k`` tokens at most), and the key
    each one's acceptance is learned under: first the text's continuation of its longest matching
    n-gram (key: that n-gram's length), then the pool's n-grams for the last token (key
    `WINDOW_KEY`), the most recent first; one that a candidate already taken starts with adds
    nothing and is left out."""
    paths: list[list[int]] = []
    keys: list[int] = []
    found = index.lookup(k) if index is not None and k > 0 and branches > 0 else None
    if found:
        paths.append(found[0])
        keys.append(found[2])
    for continuation in pool.get(seq[-1], branches):
        path = list(continuation[:k])
        if len(paths) < branches and path and not any(p[:len(path)] == path for p in paths):
            paths.append(path)
            keys.append(WINDOW_KEY)
    return paths, keys


def _extras(run, stats, params, summary) -> dict:
    steps = [it.detail for it in run.iters if isinstance(it.detail, LookaheadStep)]
    if not steps:
        return {}
    hit = [s for s in steps if s.hits]
    accepted = sum(s.accepted for s in steps)
    return {
        "pool_size": steps[-1].pool + steps[-1].added,
        "pool_hit_rate": round(len(hit) / len(steps), 3),
        "hit_accepted": round(sum(s.accepted for s in hit) / len(hit), 3) if hit else None,
        "window_share": round(sum(s.accepted for s in steps if s.source == "window") / accepted, 3)
        if accepted else None,
        "tree_nodes": round(sum(len(it.draft) for it in run.iters) / len(run.iters), 2),
        "shape": _short_shape(steps[0].shape),
    }


def run_label(p, window: int | None = None, branches: int | None = None) -> str:
    """The run's title: the parameters, and where the adaptive policy chose a narrower shape than
    they allow, what it chose: "Lookahead (W≤4→1, N=3, G≤4→2)"."""
    def part(name: str, asked: int, chosen: int | None) -> str:
        return f"{name}={asked}" if chosen is None or chosen == asked else f"{name}≤{asked}→{chosen}"

    return (f"Lookahead ({part('W', p.window, window)}, N={p.ngram_size}, {part('G', p.verify_branches, branches)}"
            f"{', pool from the window only' if p.pool == 'window' else ''}"
            f"{', fixed shape' if p.draft_policy == 'fixed' else ''})")


def _short_shape(shape: str) -> str | None:
    """"W=1, G=1 (narrowed from W=4, G=4)" of the first step's "W=1, G=1: narrowed from ...: why"."""
    head, _, why = shape.partition(": ")
    if not head:
        return None
    kind = why.split(":")[0]
    return head + (f" ({kind})" if kind.startswith(("narrowed", "fixed")) else "")


def _explain(s, cost_txt: str) -> str:
    x = s.extras
    pool = (f"the text or the pool held a candidate for the last token on {x['pool_hit_rate']:.0%} of steps"
            + (f", {x['hit_accepted']:.2f} tokens accepted per such step" if x.get("hit_accepted") is not None else "")
            + (f" ({x['window_share']:.0%} of them from the window's n-grams)" if x.get("window_share") is not None
               else "")
            if "pool_hit_rate" in x else "the pool offered nothing")
    shape = f"; shape {x['shape']}" if x.get("shape") else ""
    # the window's n-grams gave (almost) nothing: its positions were pure cost, and the text's
    # continuations alone are prompt lookup's
    idle = (x.get("window_share") is not None and x["window_share"] < IDLE_WINDOW and x.get("hit_accepted")
            and s.tau and s.tau > 1.0)
    advice = (f"; the window's n-grams gave {x['window_share']:.0%} of the accepted tokens, so its positions were "
              "nearly all cost: prompt lookup verifies the text's continuations without them" if idle else "")
    return (f"lookahead decoding emitted {s.tau or 0.0:.2f} tokens per target forward: {pool}, and every step's "
            f"forward ran the Jacobi window beside the candidates{shape}{advice}")


METHOD = register(Method(
    order=110,  # after the methods that predate it (a method registered with the default 100 comes first)
    name="lookahead",
    label="Lookahead",
    run=lookahead,
    params=(WINDOW, NGRAM_SIZE, VERIFY_BRANCHES, POOL, DRAFT_POLICY),
    greedy_only=True,
    detail="lookahead",
    figures=(
        Figure("pool_size", "pool n-grams", "n-grams the Jacobi window collected, at the end of the run", "{}"),
        Figure("pool_hit_rate", "pool hit rate", "share of steps with a candidate for the last token: the text's "
               "continuation of its last n-gram (--pool text) or the window's n-grams", "{:.0%}"),
        Figure("hit_accepted", "accepted per hit", "candidate tokens accepted per step that had candidates"),
        Figure("window_share", "from the window", "share of the accepted candidate tokens that came from the Jacobi "
               "window's n-grams (the rest: the text's own continuation)", "{:.0%}"),
        Figure("tree_nodes", "candidates / step", "candidate tokens verified per step (the window not counted)"),
        Figure("shape", "shape", "the window W and branches G this run used, and why: with the adaptive draft "
               "policy W and G are caps, narrowed where a wide forward costs more than it brings", "{}"),
    ),
    draft_length="window",
    seeded=lambda p: True,  # the window's first guesses are prompt tokens drawn at random
    sweep_fixed=swept,
    bench_targets=(BenchTarget("beats", "lookahead faster than Jacobi on every task group", other="jacobi"),),
    describe=run_label,
    extras=_extras,
    explain=_explain,
    noun="lookahead decoding",
    aliases={"W": "window", "N": "ngram_size", "G": "verify_branches"},
    summary="Jacobi iterations fill an n-gram pool; up to G pool n-grams verified as a tree in one forward",
))
