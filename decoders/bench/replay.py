"""Replaying recorded responses through the suffix trees, with no model (Arctic Inference's simulator
has this shape): what suffix decoding (and prompt lookup) would have drafted and had accepted at
each step of each response, so that depth, factor and minimum probability are tuned before any
model time is spent.

Each request is (prompt ids, response ids), in order: a session. Its response is decoded again as
greedy speculative decoding would emit it, the recorded response standing in for the target: at
each step the draft is made from this request's tree (its prompt and the response so far) and the
memory (earlier responses, and a datastore's), its longest prefix that agrees with the response
is accepted, and the response's next token follows (the fix or the bonus). After the request, its
response joins the memory for the next (as in a session of the app, or `bench --workload
session`). A request never drafts from an earlier response to the same prompt (`prompt_key`).

Reported per request: steps, tokens, tau (tokens per step: the ceiling on the speedup), the drafted
and accepted tokens, the acceptance by draft position, and a predicted speedup that charges each
verify forward over k positions ``1 + slope x (k - 1)`` one-token steps (``slope``: T(k)'s slope
over T(1): read it off a run's cost curve on the machine; the default 0.05 is a guess, not a
measurement). Pure Python: no torch, no model, no tokenizer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from decoders.methods.shared.ngram import NgramIndex
from decoders.methods.shared.suffix_draft import best_path
from decoders.methods.shared.suffix_memory import SuffixMemory, prompt_key
from decoders.methods.shared.suffix_tree import SuffixTree

MAX_POSITIONS = 64  # acceptance by position is counted up to here (the longest draft `--suffix-max` allows)


@dataclass
class ReplayParams:
    depth: int = 24
    factor: float = 1.0
    min_prob: float = 0.1
    max_draft: int = 16
    slope: float = 0.05  # a verify forward over k positions costs 1 + slope x (k - 1) one-token steps
    method: str = "suffix"  # or "prompt_lookup": the n-gram draft from this request only
    ngram_max: int = 3
    ngram_min: int = 1
    memory: bool = True  # suffix: draft from the memory too (False: this request only)


@dataclass
class RequestReplay:
    """One request replayed: its steps, what was drafted and accepted, where the time went."""

    index: int
    tokens: int = 0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    from_memory: int = 0  # accepted tokens drafted from the memory
    cost: float = 0.0  # verify cost in one-token steps (the predicted speedup's denominator)
    draft_ms: float = 0.0  # drafting and the trees' updates, in this process
    by_position: list[list[int]] = field(default_factory=lambda: [[0, 0] for _ in range(MAX_POSITIONS)])

    @property
    def tau(self) -> float:
        return self.tokens / self.steps if self.steps else 0.0

    @property
    def speedup(self) -> float:
        """Tokens over the verify cost in one-token steps: what the method would buy if drafting
        were free and T(k) were the modelled line."""
        return self.tokens / self.cost if self.cost else 0.0

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


def replay(requests: Iterable[tuple[Sequence[int], Sequence[int]]], params: ReplayParams,
           memory: SuffixMemory | None = None) -> list[RequestReplay]:
    """Replay ``requests`` in order (a session): each response decoded again by drafting, its
    tokens accepted as far as they agree with it, then joining ``memory`` (made empty when None)."""
    memory = memory if memory is not None else SuffixMemory(params.depth)
    memory.with_depth(params.depth)
    out = []
    for i, (prompt, response) in enumerate(requests):
        key = prompt_key(prompt)
        memory.forget(key)
        out.append(_one(i, list(prompt), list(response), params, memory))
        memory.add(key, response)
    return out


def _one(index: int, prompt: list[int], response: list[int], params: ReplayParams,
         memory: SuffixMemory) -> RequestReplay:
    rec = RequestReplay(index)
    seq = list(prompt)
    t0 = time.perf_counter()
    suffix = params.method == "suffix"
    if suffix:
        local = SuffixTree(params.depth)
        local_active = local.extend(local.start(), seq)
        use_memory = params.memory and len(memory) > 0
        global_active = memory.tree.matches(seq) if use_memory else []
    else:
        index_ = NgramIndex(params.ngram_min, params.ngram_max, seq)
    done = 0
    while done < len(response):
        budget = min(params.max_draft, len(response) - done - 1)
        draft: list[int] = []
        source = ""
        if budget > 0 and suffix:
            found = best_path(local, local_active, budget, params.factor, params.min_prob, params.depth)
            if found is not None:
                draft, source = found.tokens, "request"
            if use_memory:
                other = best_path(memory.tree, global_active, budget, params.factor, params.min_prob, params.depth)
                if other is not None and (found is None or other.score > found.score):
                    draft, source = other.tokens, "memory"
        elif budget > 0:
            hit = index_.lookup(budget)
            draft = hit[0] if hit else []
        n = 0
        while n < len(draft) and draft[n] == response[done + n]:
            n += 1
        for pos in range(min(len(draft), MAX_POSITIONS)):
            rec.by_position[pos][0] += 1
            rec.by_position[pos][1] += pos < n
        emit = response[done:done + n + 1]
        rec.steps += 1
        rec.drafted += len(draft)
        rec.accepted += n
        rec.from_memory += n if source == "memory" else 0
        rec.cost += 1 + params.slope * len(draft)
        done += len(emit)
        seq.extend(emit)
        if suffix:
            for t in emit:
                local_active = local.append(local_active, t)
                if use_memory:
                    global_active = memory.tree.follow(global_active, t)
        else:
            index_.extend(emit)
    rec.tokens = len(response)
    rec.draft_ms = 1000 * (time.perf_counter() - t0)
    return rec


def totals(records: Sequence[RequestReplay]) -> RequestReplay:
    """The requests' sums as one record (tau and speedup over all of their tokens)."""
    total = RequestReplay(-1)
    for r in records:
        total.tokens += r.tokens
        total.steps += r.steps
        total.drafted += r.drafted
        total.accepted += r.accepted
        total.from_memory += r.from_memory
        total.cost += r.cost
        total.draft_ms += r.draft_ms
        for pos in range(MAX_POSITIONS):
            total.by_position[pos][0] += r.by_position[pos][0]
            total.by_position[pos][1] += r.by_position[pos][1]
    return total
