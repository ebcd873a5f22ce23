"""Speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a helper drafts, the target verifies.

Drafting keeps its tokens on the device; verification of all gamma drafts is one target forward
and a handful of vectorised ops, followed by a single host transfer per iteration (the gpt-fast
pattern), so the hot loop never waits on a per-token ``.item()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from decoders.errors import DecodeError
from decoders.methods.common import DecodeContext, MethodGen, RunBuilder, ms, r
from decoders.records import KIND_AR, KIND_BONUS, KIND_FIXED, TopEntry
from decoders.sampling import make_generator, probs, sample

TOP_K = 5


@dataclass
class Verdict:
    """Verification of one draft block, still on the device."""

    n_accepted: torch.Tensor  # 0-d long
    next_token: torch.Tensor  # 0-d long: the fix (after a rejection) or the bonus token
    acc_prob: torch.Tensor  # [g] probability that each draft is accepted
    beta: torch.Tensor  # [g] sum(min(p, q)) per position (1/0 argmax match when greedy)


def verify_greedy(target_logits: torch.Tensor, drafts: torch.Tensor) -> Verdict:
    """Accept the longest prefix of drafts that equals the target's argmax; then its next argmax.

    Greedy decoding is speculative sampling at temperature 0, where p and q are one-hot: the
    acceptance probability min(1, p/q) and sum(min(p, q)) both become "argmax matches".
    """
    g = drafts.numel()
    best = target_logits.argmax(-1)  # [g+1]
    match = (best[:g] == drafts).to(torch.float32)
    n = match.cumprod(0).sum().long() if g else torch.zeros((), dtype=torch.long, device=drafts.device)
    return Verdict(n, best[n], match, match)


def verify_sampling(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, gen: torch.Generator) -> Verdict:
    """Exact speculative sampling: the emitted tokens are distributed as the target's samples.

    ``p`` [g+1, V] target probabilities, ``q`` [g, V] helper probabilities, ``drafts`` [g] sampled
    from q. Draft i is accepted with probability min(1, p_i(d)/q_i(d)); at the first rejection the
    token is resampled from normalise(max(0, p_i - q_i)); if all pass, a bonus token comes from p_g.
    """
    g = drafts.numel()
    idx = torch.arange(g, device=p.device)
    p_d = p[idx, drafts]
    q_d = q[idx, drafts]
    acc_prob = torch.clamp(p_d / q_d.clamp_min(1e-20), max=1.0)
    u = torch.rand(g, generator=gen, device=p.device)
    accepted = (u < acc_prob).to(torch.float32)
    n = accepted.cumprod(0).sum().long()
    residual = (p[:g] - q).clamp_min(0)
    mass = residual.sum(-1, keepdim=True)
    # where p <= q everywhere (mass 0) a rejection cannot happen; fall back to p to stay defined
    residual = torch.where(mass > 1e-12, residual / mass.clamp_min(1e-30), p[:g])
    candidates = sample(torch.cat([residual, p[g:]]), gen)  # [g+1]: a fix per position, then a bonus
    beta = torch.minimum(p[:g], q).sum(-1)
    return Verdict(n, candidates[n], acc_prob, beta)


class HostValues:
    """Reads back, in order, the values packed into the iteration's single host transfer."""

    def __init__(self, flat: list[float]):
        self.flat, self.pos = flat, 0

    def take(self, count: int) -> list[float]:
        out = self.flat[self.pos:self.pos + count]
        self.pos += count
        return out

    def top_entries(self, rows: int, k: int, disp) -> list[list[TopEntry]]:
        """``rows`` x top-k, packed as all indices then all values."""
        ids, vals = self.take(rows * k), self.take(rows * k)
        return [[TopEntry(int(ids[i * k + j]), disp(int(ids[i * k + j])), r(vals[i * k + j])) for j in range(k)]
                for i in range(rows)]


def speculative(ctx: DecodeContext) -> MethodGen:
    params, T, D = ctx.params, ctx.main, ctx.helper
    if D is None:
        raise DecodeError(f"{ctx.family.label} has no helper model, so speculative decoding is unavailable; "
                          "give --helper SRC or --self-draft-layer L, or pick --method pld / jacobi")
    greedy, temp, gamma = params.greedy, params.temperature, params.gamma
    mode = "greedy" if greedy else f"sampling, T={temp:g}"
    b = RunBuilder(ctx, "spec", f"Speculative ({mode}, γ={gamma})")
    device = T.backend.device
    gen = None if greedy else make_generator(params.seed, device)
    need_probs = params.record or not greedy
    disp = ctx.family.display

    while not b.done:
        budget = min(gamma, b.remaining - 1)
        if budget == 0:  # one token left: a plain step
            logits = T.run(b.seq)
            p = None if greedy else probs(logits[0], temp, greedy=False)
            token = int(logits[0].argmax() if greedy else sample(p, gen))
            it = b.commit([token], KIND_AR, [], t_verify_ms=ms(T.log[-1].seconds))
            yield from b.yielding(it)
            continue

        # Draft: `budget` helper forwards, tokens kept on the device.
        n_log = len(D.log)
        logits = D.run(b.seq)
        drafts, q_rows = [], []
        for i in range(budget):
            if i:
                logits = D.extend(drafts[-1])
            q = probs(logits[0], temp, greedy) if need_probs else None
            drafts.append(logits[0].argmax().view(1) if greedy else sample(q, gen).view(1))
            q_rows.append(q)
        t_draft = sum(f.seconds for f in D.log[n_log:])
        draft_t = torch.cat(drafts)

        # Verify: one target forward over the prefix's new part and every draft.
        z = T.run(b.seq, keep=budget + 1, tail=draft_t)
        p = probs(z, temp, greedy) if need_probs else None
        q = torch.stack(q_rows) if need_probs else None
        verdict = verify_greedy(z, draft_t) if greedy else verify_sampling(p, q, draft_t, gen)

        # One host transfer: verdict, drafts and (when recording) their probabilities and top-5s.
        parts = [verdict.n_accepted.view(1), verdict.next_token.view(1), draft_t, verdict.acc_prob, verdict.beta]
        if params.record:
            idx = torch.arange(budget, device=device)
            top_p = p.topk(TOP_K, dim=-1)
            top_q = q.topk(TOP_K, dim=-1)
            parts += [q[idx, draft_t], p[idx, draft_t], top_p.indices.flatten(), top_p.values.flatten(),
                      top_q.indices.flatten(), top_q.values.flatten()]
        got = HostValues(torch.cat([x.to(torch.float64).flatten() for x in parts]).tolist())
        n, nxt = int(got.take(1)[0]), int(got.take(1)[0])
        d_ids = [int(x) for x in got.take(budget)]
        acc, beta = got.take(budget), got.take(budget)
        D.name_tail(d_ids[: budget - 1])  # the helper cached every draft but the last
        T.name_tail(d_ids)

        fields = {"t_draft_ms": ms(t_draft), "t_verify_ms": ms(T.log[-1].seconds),
                  "beta": [r(x) for x in beta[: min(n + 1, budget)]]}
        q_d = p_d = None
        if params.record:
            q_d, p_d = got.take(budget), got.take(budget)
            fields["top"] = {"p": got.top_entries(budget + 1, TOP_K, disp),
                             "q": got.top_entries(budget, TOP_K, disp)}
        rows = b.draft_rows(d_ids, n, q_d, p_d, acc)
        it = b.commit(d_ids[:n] + [nxt], KIND_BONUS if n == budget else KIND_FIXED, rows, **fields)
        yield from b.yielding(it)
    return b.finish_run({"main": T, "helper": D})
