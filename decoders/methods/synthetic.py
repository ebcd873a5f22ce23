"""Synthetic acceptance: a measuring instrument, not a method to use.

The draft proposes the target's own greedy next token with a given probability per draft
position (given that the positions before it were proposed right) and a wrong token otherwise,
and each drafted token costs a given share ``c`` of a measured one-token target step. The target
verifies the chain in one forward exactly as speculative decoding does (`accept_prefix`), so the
run's output is the target's greedy output and its speedup is what a draft of that acceptance and
that cost would buy on this machine: the cost side measured apart from any draft's quality (vLLM's
``synthetic`` rejection mode, llama.cpp's ``--spec-synth-rates``).

How it knows the target's greedy tokens: before the run's clock starts it decodes the prompt
greedily, one token per step, on a second cache of the target (`twin_of`), untimed; that
reference is the oracle the draft copies from. Should the verify forward part from it at a near
tie (a wider forward breaking a tie the other way), the reference is decoded again from there,
with the run's clock stopped.

Why the cost is a busy-wait and not a sleep: a real draft forward keeps the core busy; a
busy-wait on ``perf_counter`` does too (on a core shared with the interleaved baseline it
contends alike), is accurate to microseconds where a sleep wakes up late by a scheduler tick
(50-100 µs, a few percent of a 2 ms draft), and leaves no idle gap in which the CPU may lower its
clock. The step it is a share of is the mean one-token forward of the untimed reference decode.

The method is not one of the built-in methods: it is registered only where it is asked for
(`enable`: ``tui-decode run --synthetic-acceptance``, the synthetic bench), so its rows never sit
among the real methods' (the app's method key, the bench's default rows) and every row it makes
is labelled "Synthetic".
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from decoders.analysis.theory import chain_speedup, expected_tokens
from decoders.core.declarations import Figure, Method, ParamSpec, get_method, register, unregister
from decoders.core.errors import DecodeError
from decoders.core.param_spec import MAX_RATES
from decoders.methods.shared.common import DecodeContext, HostValues, MethodGen, RunBuilder, ms
from decoders.methods.shared.verify import accept_prefix
from decoders.methods.speculative import GAMMA
from decoders.records.kinds import KIND_AR

if TYPE_CHECKING:
    from decoders.backends.runner import KVRunner

NAME = "synthetic"
RATES = ParamSpec("synthetic_acceptance", "synthetic α",
                  "synthetic acceptance: the probability that the draft at each position is the target's own greedy "
                  "token, given the positions before it were (one rate: every position; fewer than γ: the last "
                  f"repeats; at most γ and {MAX_RATES} rates)", (0.8,), kind="rates", low=0.0, high=1.0)
COST = ParamSpec("synthetic_cost", "synthetic c",
                 "synthetic acceptance: what one drafted token costs, as a share of a measured one-token target "
                 "step (a busy-wait)", 0.0, kind="float", low=0.0, high=4.0, step=0.05, metavar="C")

#: Tokens the oracle decodes ahead of the run at most at once (the run's budget bounds it too).
ORACLE_CHUNK = 4096


def rates_for(params) -> list[float]:
    """The acceptance rate at each of the γ draft positions (the last given rate repeats)."""
    given = [float(x) for x in params.synthetic_acceptance]
    return (given + [given[-1]] * params.gamma)[: params.gamma]


def wrong_token(right: int, vocab: int) -> int:
    """A token that is not ``right`` (the next id, wrapping)."""
    return (right + 1) % max(2, vocab)


def draft_chain(reference: Sequence[int], at: int, budget: int, rates: Sequence[float], rng: random.Random,
                vocab: int) -> list[int]:
    """Up to ``budget`` drafts from output position ``at`` of the greedy ``reference`` (fewer where
    it ends): position j is the reference's token while every draw so far, ``rng.random() <
    rates[j]``, came out right, and a wrong token from the first wrong draw on (no draw after it).
    The batch bench's synthetic rows draft with it too (`decoders.bench.batch_synthetic`)."""
    drafts: list[int] = []
    right_so_far = True
    for j in range(budget):
        if at + j >= len(reference):
            break
        right = reference[at + j]
        right_so_far = right_so_far and rng.random() < rates[j]
        drafts.append(right if right_so_far else wrong_token(right, vocab))
    return drafts


def busy_wait(seconds: float, clock=time.perf_counter) -> None:
    """Keep the core busy for ``seconds`` (see the module's note on why not sleep)."""
    if seconds <= 0:
        return
    end = clock() + seconds
    while clock() < end:
        pass


class Oracle:
    """The target's greedy continuation of the run's sequence, decoded on a second cache of the
    target, one token per step; its mean step time is the unit the draft's cost is a share of."""

    def __init__(self, runner: KVRunner, prompt: list[int], budget: int, stop_ids: frozenset[int]):
        self.runner, self.budget, self.stop_ids = runner, budget, stop_ids
        self.prompt = list(prompt)
        self.tokens: list[int] = []  # the continuation after the prompt
        self.redecoded = 0  # times the run parted from it and it was decoded again

    def decode_from(self, out: list[int]) -> None:
        """Decode the greedy continuation after the prompt and ``out`` (what the run emitted)."""
        self.runner.reset()
        self.tokens = list(out)
        seq = self.prompt + self.tokens
        while len(self.tokens) < self.budget and (not self.tokens or self.tokens[-1] not in self.stop_ids):
            token = int(self.runner.run(seq)[0].argmax())
            self.tokens.append(token)
            seq.append(token)

    def step_seconds(self) -> float:
        one = self.runner.mean_seconds(1)
        if one is None:  # a budget of one token: the prefill is the only forward
            one = self.runner.mean_seconds(None) or 0.0
        return one

    def follows(self, out: list[int]) -> bool:
        return self.tokens[: len(out)] == out


_TWINS: dict[int, Any] = {}


def _oracle_runner(ctx: DecodeContext) -> KVRunner:
    """A runner on a second cache of the target (built once per target backend)."""
    from decoders.backends.hf import twin_of
    from decoders.backends.runner import KVRunner

    main = ctx.main.backend
    held = _TWINS.get(id(main))
    if held is None or held[0] is not main:
        twin = twin_of(main)
        if twin is None:
            raise DecodeError(f"{type(main).__name__} cannot run a second cache of its model, which synthetic "
                              "acceptance decodes its reference on; use the torch backend")
        held = (main, KVRunner(twin, ctx.clock))
        _TWINS.clear()
        _TWINS[id(main)] = held
    return held[1]


@contextmanager
def _untimed(b: RunBuilder) -> Iterator[None]:
    """The block's time left out of the run's clock (the reference decoded again mid-run)."""
    t = b.ctx.clock()
    try:
        yield
    finally:
        b._paused += b.ctx.clock() - t


def synthetic(ctx: DecodeContext) -> MethodGen:
    import torch

    params, T = ctx.params, ctx.main
    if not params.greedy:
        raise DecodeError("synthetic acceptance is greedy only (it copies the target's greedy tokens); "
                          "use --mode greedy")
    rates, gamma = rates_for(params), params.gamma
    rng = random.Random(params.seed)
    oracle = Oracle(_oracle_runner(ctx), ctx.prompt_ids, params.max_new_tokens, ctx.family.stop_ids)
    oracle.decode_from([])  # before the run's clock starts: untimed
    step = oracle.step_seconds()
    vocab = int(T.backend.vocab_size)
    b = RunBuilder(ctx, NAME)
    while not b.done:
        if not oracle.follows(b.out):  # the run parted from the reference at a near tie
            with _untimed(b):
                oracle.decode_from(b.out)
                oracle.redecoded += 1
        budget = min(gamma, b.remaining - 1)
        if budget <= 0 or not T.held:  # the prefill, and the last token: a plain step
            logits = T.run(b.seq)
            token = HostValues.transfer([logits[0].argmax().view(1)]).ints(1)[0]
            it = b.commit([token], KIND_AR, [], t_verify_ms=ms(T.log[-1].seconds))
            yield from b.yielding(it)
            continue
        t0 = ctx.clock()
        drafts = draft_chain(oracle.tokens, len(b.out), budget, rates, rng, vocab)
        busy_wait(len(drafts) * params.synthetic_cost * step)
        t_draft = ctx.clock() - t0
        g = len(drafts)
        z = T.run(b.seq + drafts, keep=g + 1)
        verdict = accept_prefix(z.argmax(-1), z.new_tensor(drafts, dtype=torch.long))
        got = HostValues.transfer([verdict.n_accepted.view(1), verdict.next_token.view(1)])
        n, nxt = got.ints(2)
        it = b.commit_verified(drafts, n, nxt, b.draft_rows(drafts, n), t_draft_ms=ms(t_draft),
                               t_verify_ms=ms(T.log[-1].seconds))
        yield from b.yielding(it)
    run = b.finish_run({"main": T})
    run.time_ms["synthetic_step"] = round(1000 * step, 3)
    run.time_ms["synthetic_redecoded"] = float(oracle.redecoded)
    return run


def check(params, ui: bool = False) -> None:
    if len(params.synthetic_acceptance) > params.gamma:
        plural = "" if params.gamma == 1 else "s"
        fix = "lower them or raise γ" if ui else f"give at most {params.gamma} rate{plural} or raise --gamma"
        raise DecodeError(f"synthetic acceptance gives {len(params.synthetic_acceptance)} rates for γ={params.gamma} "
                          f"draft position{plural}; {fix}")


def _extras(run, stats, params, summary) -> dict:
    """The rates asked for beside those the run met, the draft's cost asked for beside the
    measured one, and Theorem 3.8 with the measured verify cost (`chain_speedup`) at the rates
    asked for: what the bench sets beside the measured speedup."""
    rates = rates_for(params)
    step = run.time_ms.get("synthetic_step") or 0.0
    drafted = [it for it in run.iters if it.draft]
    tokens = sum(len(it.draft) for it in drafted)
    c_hat = (sum(it.t_draft_ms for it in drafted) / tokens / step) if tokens and step else 0.0
    out: dict[str, Any] = {
        "synthetic": True,
        "gamma": params.gamma,
        "rates": ",".join(f"{x:g}" for x in params.synthetic_acceptance),
        "c": params.synthetic_cost,
        "c_hat": round(c_hat, 3),
        "alpha_hat": stats.acceptance,
        "expected_tokens": round(expected_tokens(rates[0], params.gamma), 3) if len(set(rates)) == 1 else None,
        "predicted_speedup": round(chain_speedup(rates, params.gamma, params.synthetic_cost, 1.0), 3),
    }
    curve = summary.verify_cost_curve
    if curve and len(curve) > params.gamma:  # T(γ + 1): the measured cost of the verify forward
        out["verify_cost"] = round(curve[params.gamma], 3)
        out["predicted_speedup_cost_aware"] = round(
            chain_speedup(rates, params.gamma, params.synthetic_cost, curve[params.gamma]), 3)
    full = [it.t_verify_ms for it in drafted if len(it.draft) == params.gamma]
    if full and summary.target_fwd_ms:  # T(γ + 1) from this run's own verifies over the paired baseline's steps,
        in_run = sum(full) / len(full) / summary.target_fwd_ms  # timed in the same seconds (a curve measured
        out["verify_cost_in_run"] = round(in_run, 3)  # after the run misses a load that changed meanwhile)
        out["predicted_speedup_in_run"] = round(chain_speedup(rates, params.gamma, params.synthetic_cost, in_run), 3)
    redecoded = run.time_ms.get("synthetic_redecoded")
    if redecoded:
        out["reference_redecoded"] = int(redecoded)
    return out


def _describe(params) -> str:
    rates = ",".join(f"{x:g}" for x in params.synthetic_acceptance)
    return f"Synthetic (acceptance {rates}, c={params.synthetic_cost:g}, γ={params.gamma})"


METHOD = Method(
    order=90,
    name=NAME,
    label="Synthetic acceptance",
    run=synthetic,
    params=(GAMMA, RATES, COST),
    greedy_only=True,
    figures=(
        Figure("rates", "rates asked", "the acceptance per draft position the synthetic draft was given", "{}"),
        Figure("alpha_hat", "alpha_hat", "the share of judged drafts accepted in this run"),
        Figure("c", "c asked", "the draft's cost per token asked for, in one-token target steps"),
        Figure("c_hat", "c_hat", "the draft's measured cost per token, in one-token target steps"),
        Figure("verify_cost", "T(γ+1)", "the measured cost of the (γ+1)-token verify, in one-token steps"),
        Figure("predicted_speedup", "predicted", "Theorem 3.8 at the rates and cost asked for", "{:.2f}x"),
        Figure("predicted_speedup_cost_aware", "predicted (cost)",
               "the same with the measured cost of the verify forward in place of one step", "{:.2f}x"),
        Figure("verify_cost_in_run", "T(γ+1) in run", "the run's own (γ+1)-token verifies over the paired "
               "baseline's one-token steps"),
        Figure("predicted_speedup_in_run", "predicted (in run)", "Theorem 3.8 with the verify cost measured in the "
               "run", "{:.2f}x"),
        Figure("reference_redecoded", "reference redecoded", "times the run parted from the greedy reference at a "
               "near tie and the reference was decoded again (untimed)", "{}"),
    ),
    draft_length="gamma",
    check=check,
    extras=_extras,
    describe=_describe,
    noun="synthetic acceptance",
    summary="a measuring instrument: a draft right with given per-position rates, costing a given share of a step",
)


def enable() -> Method:
    """Register the synthetic method (idempotent); what asks for a synthetic run calls it first."""
    return register(METHOD)


def enabled_now() -> bool:
    try:
        return get_method(NAME) is METHOD
    except DecodeError:
        return False


@contextmanager
def enabled() -> Iterator[Method]:
    """The synthetic method registered for the length of the block (tests), as it was after."""
    was = enabled_now()
    enable()
    try:
        yield METHOD
    finally:
        if not was:
            unregister(NAME)
