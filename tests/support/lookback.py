"""A method that exists only in the tests: guess that the last ``span`` tokens repeat, verify
greedily in one forward. Declared and registered by the tests that need it (`registered`)."""

from __future__ import annotations

from decoders.core.declarations import ParamSpec
from decoders.methods.shared.common import HostValues, RunBuilder, ms
from decoders.methods.shared.verify import accept_prefix
from decoders.records.run import Detail, register_detail

SPAN = ParamSpec("span", "span", "lookback: how many of the last tokens to guess again", 2, low=1, high=6)


@register_detail
class Echo(Detail, tag="echo"):
    guessed: list[int]


def lookback(ctx):
    """Guess that the last ``span`` tokens repeat; verify greedily in one forward."""
    T, span = ctx.main, ctx.params.span
    b = RunBuilder(ctx, "lookback")
    while not b.done:
        drafts = b.seq[-span:][: b.remaining - 1]
        best = T.run(b.seq + drafts, keep=len(drafts) + 1).argmax(-1)
        verdict = accept_prefix(best, best.new_tensor(drafts))
        got = HostValues.transfer([verdict.n_accepted.view(1), verdict.next_token.view(1)])
        n, nxt = got.ints(2)
        it = b.commit_verified(drafts, n, nxt, b.draft_rows(drafts, n), t_verify_ms=ms(T.log[-1].seconds),
                               detail=Echo(list(drafts)))
        yield from b.yielding(it)
    return b.finish_run({"main": T})
