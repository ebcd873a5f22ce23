"""Jacobi decoding (Santilli et al. 2023): refine a block of guesses in parallel until they stop changing.

Each iteration runs the target once over the prefix plus a block of m guesses. The leading
guesses that the model reproduces are exact (each one is conditioned only on exact tokens),
and so is the model's answer right after them: at least one token per forward, often more when
the text is predictable. The unconverged answers carry over as the next guesses.
"""

from __future__ import annotations

from typing import Annotated

from decoders.core.declarations import Figure, Method, ParamSpec, register
from decoders.methods.shared.common import DecodeContext, HostValues, MethodGen, RunBuilder, ms
from decoders.methods.shared.verify import accept_prefix
from decoders.records.bounds import Count, PerStep
from decoders.records.run import Detail, register_detail

BLOCK = ParamSpec("block", "m block size", "Jacobi: guesses refined together per iteration", 4,
                  low=1, high=64, metavar="M", symbol="m")
INIT = ParamSpec("init", "init", "Jacobi: initial fill of the block (repeat the last token, or random)",
                 "repeat", kind="choice", choices=("repeat", "random"))


@register_detail
class JacobiBlock(Detail, tag="jacobi"):
    """The block fed in, the model's greedy answer at each guess, and the tokens committed."""

    before: Annotated[list[list], PerStep]  # [[token, text], ...] the guesses fed in
    after: Annotated[list[list], PerStep]  # [[token, text], ...] the model's greedy answer at each guess
    fixed: Count  # tokens committed by this iteration


def initial_fill(seq: list[int], m: int, how: str, gen, vocab: int) -> list[int]:
    """Guesses for positions nobody has predicted yet."""
    import torch

    if m <= 0:
        return []
    if how == "random":
        return torch.randint(0, vocab, (m,), generator=gen).tolist()
    return [seq[-1]] * m  # "repeat": the last known token


def jacobi(ctx: DecodeContext) -> MethodGen:
    import torch

    params, T = ctx.params, ctx.main
    m = params.block
    b = RunBuilder(ctx, "jacobi")
    gen = torch.Generator().manual_seed(params.seed)
    vocab = ctx.family.vocab_size
    disp = ctx.family.display
    guesses = initial_fill(b.seq, m, params.init, gen, vocab)
    while not b.done:
        guesses = guesses[: min(m, b.remaining - 1)]  # at most g + 1 tokens are committed
        g = len(guesses)
        best = T.run(b.seq + guesses, keep=g + 1).argmax(-1)
        verdict = accept_prefix(best, best.new_tensor(guesses))
        got = HostValues.transfer([verdict.n_accepted.view(1), best])
        a, answers = got.ints(1)[0], got.ints(g + 1)
        block = JacobiBlock(before=[[t, disp(t)] for t in guesses], after=[[t, disp(t)] for t in answers[:g]],
                            fixed=a + 1)
        it = b.commit_verified(guesses, a, answers[a], b.draft_rows(guesses, a), t_verify_ms=ms(T.log[-1].seconds),
                               detail=block)
        block.fixed = len(it.emit)
        yield from b.yielding(it)
        # the answers past the first miss are the refined guesses; refill the rest of the block
        carried = answers[a + 1:g]
        guesses = carried + initial_fill(b.seq, m - len(carried), params.init, gen, vocab)
    return b.finish_run({"main": T})


def _extras(run, stats, params, summary) -> dict:
    return {"block": params.block}


METHOD = register(Method(
    order=30,
    name="jacobi",
    label="Jacobi",
    run=jacobi,
    params=(BLOCK, INIT),
    greedy_only=True,
    detail="jacobi",
    figures=(Figure("block", "block m", "guesses refined together per iteration", "{}"),),
    draft_length="block",
    seeded=lambda p: p.init == "random",  # the random initial guesses
    describe=lambda p: f"Jacobi (block m={p.block}, {p.init} init)",
    extras=_extras,
    noun="Jacobi iteration",
    aliases={"m": "block"},
    summary="refine a block of guesses in parallel; keep the prefix that stops changing",
))
