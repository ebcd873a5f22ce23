"""Autoregressive decoding: one target forward per token, the baseline every method is measured against."""

from __future__ import annotations

from decoders.core.declarations import Counterpart, LoopCounterpart, Method, register
from decoders.methods.shared.common import DecodeContext, MethodGen, RunBuilder, mode_text, ms
from decoders.records.kinds import KIND_AR


def autoregressive(ctx: DecodeContext, label: str | None = None) -> MethodGen:
    from decoders.backends.sampling import make_generator, pick, probs
    from decoders.methods.shared.common import HostValues

    params, T = ctx.params, ctx.main
    b = RunBuilder(ctx, "ar", label or describe(params))
    gen = None if params.greedy else make_generator(params.seed, T.backend.device)
    while not b.done:
        logits = T.run(b.seq)[0]
        p = None if params.greedy else probs(logits, params.temperature, greedy=False)
        token = HostValues.transfer([pick(logits, p, params.greedy, gen).view(1)]).ints(1)[0]
        it = b.commit([token], KIND_AR, [], t_verify_ms=ms(T.log[-1].seconds))
        yield from b.yielding(it)
    return b.finish_run({"main": T})


def describe(params) -> str:
    return f"Autoregressive ({mode_text(params)})"


METHOD = register(Method(
    order=0,
    baseline=True,
    name="ar",
    label="Autoregressive",
    run=autoregressive,
    describe=describe,
    counterpart=Counterpart(lambda p, assistant: "transformers generate() greedy"),  # plain greedy generate()
    llamacpp_counterpart=LoopCounterpart(lambda p: "llama-cpp-python Llama.generate() greedy"),
    summary="one target forward per token: the baseline every method is measured against",
))
