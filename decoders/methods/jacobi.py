"""Jacobi decoding (Santilli et al. 2023): refine a block of guesses in parallel until they stop changing.

Each iteration runs the target once over the prefix plus a block of m guesses. The leading
guesses that the model reproduces are exact (each one is conditioned only on exact tokens),
and so is the model's answer right after them: at least one token per forward, often more when
the text is predictable. The unconverged answers carry over as the next guesses.
"""

from __future__ import annotations

import torch

from decoders.methods.common import DecodeContext, MethodGen, RunBuilder, ms
from decoders.records import KIND_AR, KIND_BONUS, KIND_FIXED, JacobiBlock


def initial_fill(seq: list[int], m: int, how: str, gen: torch.Generator, vocab: int) -> list[int]:
    """Guesses for positions nobody has predicted yet."""
    if m <= 0:
        return []
    if how == "random":
        return torch.randint(0, vocab, (m,), generator=gen).tolist()
    return [seq[-1]] * m  # "repeat": the last known token


def jacobi(ctx: DecodeContext) -> MethodGen:
    params, T = ctx.params, ctx.main
    m = params.block
    b = RunBuilder(ctx, "jacobi", f"Jacobi (block m={m}, {params.init} init)")
    gen = torch.Generator().manual_seed(params.seed)
    vocab = ctx.family.vocab_size
    disp = ctx.family.display
    guesses = initial_fill(b.seq, m, params.init, gen, vocab)
    while not b.done:
        guesses = guesses[: min(m, b.remaining - 1)]  # at most g + 1 tokens are committed
        g = len(guesses)
        answers = T.run(b.seq + guesses, keep=g + 1).argmax(-1).tolist()
        a = 0
        while a < g and guesses[a] == answers[a]:
            a += 1
        commit = guesses[:a] + [answers[a]]
        kind = KIND_AR if g == 0 else (KIND_BONUS if a == g else KIND_FIXED)
        block = JacobiBlock(before=[[t, disp(t)] for t in guesses], after=[[t, disp(t)] for t in answers[:g]],
                            fixed=len(commit))
        it = b.commit(commit, kind, b.draft_rows(guesses, a), t_verify_ms=ms(T.log[-1].seconds), jacobi=block)
        block.fixed = len(it.emit)
        yield from b.yielding(it)
        # the answers past the first miss are the refined guesses; refill the rest of the block
        carried = answers[a + 1:g]
        guesses = carried + initial_fill(b.seq, m - len(carried), params.init, gen, vocab)
    return b.finish_run({"main": T})
