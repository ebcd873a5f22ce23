"""Speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a helper drafts, the target verifies.

Drafting keeps its tokens on the device; verification of all gamma drafts is one target forward
and a handful of vectorised ops (`decoders.methods.shared.verify`), followed by a single host transfer
per iteration (the gpt-fast pattern), so the hot loop never waits on a per-token ``.item()``.
"""

from __future__ import annotations

from decoders.analysis.theory import best_gamma, cost_aware_speedup, expected_tokens, predicted_speedup, speedup_curve
from decoders.backends.capabilities import CappedDraft, TreeDrafter
from decoders.core.declarations import BenchTarget, Counterpart, Figure, Method, ParamSpec, register
from decoders.core.errors import DecodeError
from decoders.methods.shared.common import (
    DecodeContext,
    HostValues,
    MethodGen,
    RunBuilder,
    draft_chain,
    mode_text,
    ms,
    r,
)
from decoders.methods.shared.draft_policy import (
    DRAFT_POLICY,
    PRIOR_SLOPE,
    STOP_BUDGET,
    STOP_EXPLORE,
    STOP_GAMMA,
    STOP_PAY,
    STOP_PREFILL,
    SpecDraftPolicy,
    VerifyCost,
)
from decoders.methods.shared.head_tree import dynamic_tree_step
from decoders.methods.shared.spec_tree import TREE, TREE_DEPTH, TREE_WIDTH, tree_step
from decoders.methods.shared.suffix_draft import best_path
from decoders.methods.shared.suffix_policy import HybridChoice, hybrid_reason, joined_reason
from decoders.methods.shared.suffix_trees import SuffixTrees, hybrid_figures, one_hot_step
from decoders.methods.shared.verify import accept_prefix, verify_sampling
from decoders.records.kinds import KIND_AR
from decoders.records.run import TopK

TOP_K = 5
GAMMA = ParamSpec("gamma", "γ draft length", "speculative: tokens drafted per iteration", 4, low=1, high=32,
                  ui_range=(1, 16), symbol="γ")
HYBRID = ParamSpec("hybrid", "hybrid draft",
                   "speculative, linear draft: each iteration verify the suffix trees' draft (this request and "
                   "the memory of earlier responses; the --suffix-* settings) in place of the helper's when its "
                   "expected accepted length beats the helper draft's (Arctic Inference's rule); off: the helper "
                   "drafts every iteration", "off", kind="choice", choices=("off", "suffix"))
NO_HELPER = ("has no helper model, so speculative decoding is unavailable; "
             "give --helper SRC or --self-draft-layer L, or pick --method pld / jacobi")


def speculative(ctx: DecodeContext) -> MethodGen:
    import torch

    from decoders.backends.host import to_host
    from decoders.backends.sampling import make_generator, probs, sample

    params, T, D = ctx.params, ctx.main, ctx.helper
    if D is None:
        raise DecodeError(f"{ctx.family.label} {NO_HELPER}")
    greedy, temp, gamma = params.greedy, params.temperature, params.gamma
    if isinstance(D.backend, CappedDraft):  # Medusa: no head beyond its last
        gamma = min(gamma, D.backend.max_draft)
    # a self-draft reads the target's keys and values for every verified position (LayerSkip's
    # shared cache): no draft prefill, no catch-up forwards; a helper model keeps its own cache
    D.follow(T)
    tree = params.greedy and params.tree_width > 1  # sampling stays linear (see decoders/methods/spec_tree.py)
    # the hybrid's trees are made before the clock starts (the memory's upkeep is the session's work)
    trees = SuffixTrees(ctx) if params.hybrid == "suffix" and not tree else None
    b = RunBuilder(ctx, "spec")
    device = T.backend.device
    gen = None if greedy else make_generator(params.seed, device)
    need_probs = params.record or not greedy
    disp = ctx.family.display
    # Adaptive draft length: reads the helper's confidence in each draft (one scalar per draft,
    # the only host reads beyond the iteration's transfer), never the target's verdict early.
    policy = None
    if params.draft_policy == "adaptive" and not tree:
        # sampling: costs fixed up front (weight bytes, a device prior), so a seed gives the same tokens
        fixed = None if greedy else (D.backend.weight_bytes / max(1, T.backend.weight_bytes),
                                     PRIOR_SLOPE if device.type == "cpu" else 0.0)
        policy = SpecDraftPolicy(gamma, ctx.cost_curve, fixed)
    confs: list[float] = []
    limit = gamma
    hybrid = None
    if trees is not None:
        trees.start(b.seq)
        hybrid = HybridChoice(ctx.cost_curve, learn_costs=greedy, cut=params.draft_policy == "adaptive")

    def emitted(it):  # every iteration's tokens join the hybrid's tree of this request
        if trees is not None:
            t1 = ctx.clock()
            trees.advance_by(b, len(it.emit))
            it.t_draft_ms = round(it.t_draft_ms + ms(ctx.clock() - t1), 3)  # the trees' upkeep is drafting's cost
        yield from b.yielding(it)
    head_tree = VerifyCost(ctx.cost_curve) if tree and isinstance(D.backend, TreeDrafter) else None

    def pick_draft(row):
        q = probs(row, temp, greedy) if need_probs else None
        if greedy:
            return row.argmax().view(1), q
        assert q is not None and gen is not None  # sampling: probabilities and a generator
        return sample(q, gen).view(1), q

    def keep_going(row, token, q):
        conf = (q if q is not None else torch.softmax(row, -1))[token]
        confs.append(to_host([conf])[0])
        assert policy is not None  # keep_going is the adaptive policy's
        return policy.keep_drafting(confs, limit)

    while not b.done:
        budget = min(gamma, b.remaining - 1)
        why = ""
        # a following self-draft has no cache until the target's first forward: that one is a plain step
        prefill = D.source is not None and not T.held
        if prefill:
            why = STOP_PREFILL
        elif policy is not None:
            limit, reason = policy.plan(budget)
            why = reason or ""
        chose = ""
        if trees is not None and hybrid is not None and budget > 0:
            t0 = ctx.clock()
            found = trees.draft(best_path, budget)
            model_len = 0 if prefill or (policy is not None and limit == 0) else (limit if policy else budget)
            # under the adaptive policy the two drafts are weighed by their cost too (the helper's c, T(k))
            choice = hybrid.pick(found.probs if found else [], model_len,
                                 (policy.c, policy.verify.cost) if policy is not None else None)
            take = choice.take
            if found is not None and take:  # the suffix draft: free, and its q one-hot
                mine_t = list(found.tokens[:take])
                t_draft = ctx.clock() - t0
                fields = {"detail": trees.detail(found, b.seq), "draft_stop": hybrid_reason(choice, found)}
                n, nxt, p_d = one_hot_step(b, T, mine_t, gen, verify_sampling)
                if T.log[-1].positions == take + 1:  # a decode forward, not one that also prefilled
                    hybrid.suffix.observe(found.probs[:take], n, take + 1, T.log[-1].seconds)
                it = b.commit_verified(mine_t, n, nxt, b.draft_rows(mine_t, n, p=p_d), t_draft_ms=ms(t_draft),
                                       t_verify_ms=ms(T.log[-1].seconds), **fields)
                yield from emitted(it)
                continue
            chose = hybrid_reason(choice, found)
        if prefill or budget == 0 or (policy is not None and limit == 0):  # a plain step
            logits = T.run(b.seq)
            if greedy:
                picked = logits[0].argmax()
            else:
                assert gen is not None  # made whenever sampling
                picked = sample(probs(logits[0], temp, greedy=False), gen)
            token = HostValues.transfer([picked.view(1)]).ints(1)[0]
            it = b.commit([token], KIND_AR, [], t_verify_ms=ms(T.log[-1].seconds), draft_stop=joined_reason(why, chose))
            if policy is not None and not prefill:
                policy.observe([], 0, [], T.log[-1].positions, T.log[-1].seconds)
            yield from emitted(it)
            continue
        if tree and head_tree is not None:  # a trained head drafts EAGLE-2's dynamic tree
            it = dynamic_tree_step(b, T, D, min(budget, params.tree_depth), params.tree_width, head_tree,
                                   params.record)
            yield from b.yielding(it)
            continue
        if tree:
            it = tree_step(b, T, D, budget, params.tree_width, params.tree_depth, params.record)
            yield from b.yielding(it)
            continue

        # Draft: up to `limit` helper forwards, tokens kept on the device.
        mark = D.mark()
        confs.clear()
        drafts, q_rows = draft_chain(D, b.seq, limit, pick_draft, keep_going if policy is not None else None)
        budget = len(drafts)
        if policy is not None and why != STOP_EXPLORE:
            why = STOP_PAY if budget < limit else STOP_GAMMA if budget == gamma else STOP_BUDGET
        draft_t = torch.cat(drafts)

        # Verify: one target forward over the prefix's new part and every draft.
        z = T.run(b.seq, keep=budget + 1, tail=draft_t)
        p = probs(z, temp, greedy) if need_probs else None
        q = torch.stack(q_rows) if need_probs else None
        if greedy:
            verdict = accept_prefix(z.argmax(-1), draft_t)
        else:
            assert p is not None and q is not None and gen is not None  # sampling needs the probabilities
            verdict = verify_sampling(p, q, draft_t, gen)

        # One host transfer: verdict, drafts and (when recording) their probabilities and top-5s.
        parts = [verdict.n_accepted.view(1), verdict.next_token.view(1), draft_t, verdict.acc_prob, verdict.beta]
        if params.record:
            assert p is not None and q is not None  # recording needs the probabilities
            idx = torch.arange(budget, device=device)
            top_p = p.topk(TOP_K, dim=-1)
            top_q = q.topk(TOP_K, dim=-1)
            parts += [q[idx, draft_t], p[idx, draft_t], top_p.indices.flatten(), top_p.values.flatten(),
                      top_q.indices.flatten(), top_q.values.flatten()]
        got = HostValues.transfer(parts)
        n, nxt = got.ints(1)[0], got.ints(1)[0]
        d_ids = got.ints(budget)
        acc, beta = got.take(budget), got.take(budget)
        t_draft = D.seconds_since(mark)  # with the catch-up; read after the transfer: no wait on CUDA events
        D.name_tail(d_ids[: budget - 1])  # the helper cached every draft but the last
        T.name_tail(d_ids)

        if policy is not None:
            policy.observe(confs, n, [f.seconds for f in D.log[mark[0]:] if f.positions == 1],
                           T.log[-1].positions, T.log[-1].seconds)
        if hybrid is not None:
            hybrid.observe_model(budget, n)
        fields = {"t_draft_ms": ms(t_draft), "t_verify_ms": ms(T.log[-1].seconds),
                  "draft_stop": joined_reason(why, chose), "beta": [r(x) for x in beta[: min(n + 1, budget)]]}
        q_d = p_d = None
        if params.record:
            q_d, p_d = got.take(budget), got.take(budget)
            fields["detail"] = TopK(p=got.top_entries(budget + 1, TOP_K, disp), q=got.top_entries(budget, TOP_K, disp))
        rows = b.draft_rows(d_ids, n, q_d, p_d, acc)
        it = b.commit_verified(d_ids, n, nxt, rows, **fields)
        yield from emitted(it)
    return b.finish_run({"main": T, "helper": D})


PLOT_GAMMAS = 10  # gammas 1..10 on the plot; the best gamma is searched over the whole range
#: A best gamma from alpha_hat at least this, on fewer judged drafts than this, is marked extrapolated.
EXTRAPOLATED_ALPHA = 0.95
EXTRAPOLATED_DRAFTS = 100


def _best(curve: list[list[float]]) -> int | str:
    """The fastest gamma of ``curve``; at the curve's last gamma it may lie beyond: "N or more"."""
    best = best_gamma(curve)
    return f"{best} or more" if best == curve[-1][0] and len(curve) > 1 else best


def _drafted(run) -> tuple[list[int], int]:
    """Draft lengths of the iterations that drafted, and how many decode iterations drafted
    nothing (the first, the target's prefill, left out)."""
    lengths = [len(it.draft) for it in run.iters if it.draft]
    return lengths, sum(1 for it in run.iters[1:] if not it.draft)


def _extras(run, stats, params, summary) -> dict:
    """Theorem 3.8 of Leviathan et al. from the run's own alpha and c, and the gamma curve, at
    the draft length the run used: gamma itself when fixed, the mean drafted length when the
    adaptive policy cut drafts. A draft tree is not one linear draft: no prediction."""
    alpha = stats.alpha_hat or 0.0
    base_fwd = summary.target_fwd_ms
    helper_fwd = run.time_ms.get("helper_fwd_mean") or 0.0
    c = helper_fwd / base_fwd if base_fwd else 0.0
    lengths, plain = _drafted(run)
    out = {"gamma": params.gamma, "c_hat": round(c, 3), "drafting_iterations": len(lengths), "plain_steps": plain,
           "mean_drafted": round(sum(lengths) / len(lengths), 2) if lengths else 0.0}
    catch_up = run.time_ms.get("helper_catch_up")
    u = 0.0
    if catch_up and base_fwd and run.ids:  # per token the run yielded, in target one-token steps
        u = catch_up / len(run.ids) / base_fwd
        out["catch_up_cost"] = round(u, 3)
    if params.hybrid == "suffix" and not (params.tree_width > 1 and params.greedy):
        out.update(hybrid_figures(run), alpha_hat=round(stats.alpha_hat or 0.0, 3))  # of the helper's drafts:
        return out  # the suffix draft's q is one-hot; Theorem 3.8 predicts neither draft's mix
    if params.tree_width > 1 and params.greedy:
        out["tree"] = f"{params.tree_width}x{min(params.tree_depth, params.gamma)}"
        drafting = [it for it in run.iters if it.draft]
        if drafting and base_fwd:  # what one drafting iteration cost, measured, in target one-token steps
            out["tree_draft_cost"] = round(sum(it.t_draft_ms for it in drafting) / len(drafting) / base_fwd, 3)
            out["tree_verify_cost"] = round(sum(it.t_verify_ms for it in drafting) / len(drafting) / base_fwd, 3)
        return out
    gamma = params.gamma
    if params.draft_policy == "adaptive" and lengths:
        gamma = max(1, min(params.gamma, round(out["mean_drafted"])))
    assert GAMMA.high is not None  # gamma's spec has an upper bound
    gammas = range(1, int(GAMMA.high) + 1)
    every = speedup_curve(alpha, c, gammas)
    curve = every[:PLOT_GAMMAS]  # what the gamma plot draws
    out.update({
        "gamma_used": gamma,
        "alpha_hat": round(alpha, 3),
        "predicted_speedup": round(predicted_speedup(alpha, gamma, c), 3),
        "expected_tokens": round(expected_tokens(alpha, gamma), 3),
        "curve": curve,
        "gamma_star": _best(every),
    })
    if alpha >= EXTRAPOLATED_ALPHA and stats.judged < EXTRAPOLATED_DRAFTS:
        # alpha_hat near 1 on few drafts puts the best gamma far out, on evidence that says little
        out["gamma_star_extrapolated"] = f"alpha_hat {alpha:.2f} from {stats.judged} judged drafts"
    T = summary.verify_cost_curve
    if T and len(T) > gamma:  # the measured cost of a (gamma + 1)-token verify
        cost_curve = [[g, round(cost_aware_speedup(alpha, g, c, T[g], u), 3)] for g in gammas if g < len(T)]
        out["cost_curve"] = cost_curve[:PLOT_GAMMAS]
        out["gamma_star_cost_aware"] = _best(cost_curve)
        out["predicted_speedup_cost_aware"] = round(cost_aware_speedup(alpha, gamma, c, T[gamma], u), 3)
    elif summary.verify_cost is not None:
        out["predicted_speedup_cost_aware"] = round(cost_aware_speedup(alpha, gamma, c, summary.verify_cost, u), 3)
    return out


def _explain(s, cost_txt: str) -> str:
    x = s.extras
    c = x["c_hat"]
    drafted = (f"{x['drafting_iterations']} iterations drafted {x['mean_drafted']:.1f} tokens on average"
               + (f" and {x['plain_steps']} were plain steps" if x.get("plain_steps") else ""))
    if "tree" in x:
        why = (f"{s.tau or 0.0:.2f} tokens per target forward with a {x['tree']} draft tree ({drafted}, a helper "
               f"forward costing {c:.2f} target forwards, and {cost_txt}); Theorem 3.8 assumes one linear draft, "
               "so no prediction is made for a tree")
        if "tree_draft_cost" in x:  # the tree's own accounting: tokens per iteration against what it cost
            cost = x["tree_draft_cost"] + x["tree_verify_cost"]
            ratio = (s.tau or 0.0) / cost if cost else 0.0
            # its own accounting, not the verdict (the headline's, above): "the tree's tokens outweighed..."
            why += (f"; measured, each drafting iteration cost {cost:.2f} target steps (drafting "
                    f"{x['tree_draft_cost']:.2f}, verifying its {x['mean_drafted']:.1f} nodes "
                    f"{x['tree_verify_cost']:.2f}) "
                    f"for {s.tau or 0.0:.2f} tokens: {ratio:.2f} tokens per step's cost, so its tokens "
                    + ("outweighed its cost" if ratio > 1.0 else "fell short of its cost"))
        return why
    catch_up = (f", catching up on the verified positions {x['catch_up_cost']:.2f} per token"
                if (x.get("catch_up_cost") or 0.0) >= 0.01 else "")
    why = (f"{s.tau or 0.0:.2f} tokens per target forward (alpha≈{x['alpha_hat']:.2f}): {drafted}, each helper "
           f"forward costing {c:.2f} target forwards{catch_up}, and {cost_txt}")
    if "suffix_drafted" in x:  # the hybrid: whose drafts they were
        share = x.get("from_suffix")
        why += (f"; the suffix trees drafted in {x['suffix_drafted']} of those iterations"
                + (f", {share:.0%} of the accepted drafted tokens" if share is not None else ""))
    predicted = x.get("predicted_speedup_cost_aware")
    if predicted is not None:  # what the theorem says at this acceptance and this machine's T(k); what binds
        why += f"; Theorem 3.8 with the measured costs predicts {predicted:.2f}x"  # is the sentence's (`cause`)
    return why


def _describe(params) -> str:
    tree = ""
    if params.tree_width > 1:
        tree = (f", tree {params.tree_width}x{min(params.tree_depth, params.gamma)}" if params.greedy
                else ", linear: a draft tree needs greedy mode")
    hybrid = ""
    if params.hybrid == "suffix":  # a draft tree is the helper's alone
        hybrid = ", no hybrid: a tree" if params.tree_width > 1 and params.greedy else ", + suffix"
    policy = ", adaptive" if params.draft_policy == "adaptive" and not (params.tree_width > 1 and params.greedy) else ""
    return f"Speculative ({mode_text(params)}, γ{'≤' if policy else '='}{params.gamma}{policy}{tree}{hybrid})"


METHOD = register(Method(
    order=10,
    name="spec",
    label="Speculative",
    default=True,  # what runs when no method is named
    run=speculative,
    params=(GAMMA, DRAFT_POLICY, TREE_WIDTH, TREE_DEPTH, HYBRID),
    needs_helper=True,
    detail="topk",
    figures=(
        Figure("mean_drafted", "mean drafted", "tokens drafted per iteration that drafted (the adaptive policy "
               "drafts fewer than γ, or none, where a draft would not pay)"),
        Figure("plain_steps", "plain steps", "decode iterations that drafted nothing (one target step each)", "{}"),
        Figure("gamma_used", "γ for the theorem", "the draft length the predictions below assume: γ when fixed, "
               "the mean drafted length when the adaptive policy cut drafts", "{}"),
        Figure("suffix_drafted", "suffix drafted", "hybrid: iterations the suffix trees drafted in place of the "
               "helper (their expected accepted length was the larger)", "{}"),
        Figure("from_suffix", "from suffix", "hybrid: share of the accepted drafted tokens the suffix trees drafted",
               "{:.0%}"),
        Figure("tree", "draft tree", "width x depth of the draft tree (no Theorem 3.8 prediction for a tree)", "{}"),
        Figure("alpha_hat", "alpha_hat", "mean sum(min(p, q)) over verified positions: the acceptance theory expects"),
        Figure("c_hat", "c_hat", "one helper forward in target forwards (its relative cost)"),
        Figure("catch_up_cost", "catch-up / token", "a following draft's copy of the target's cache (a trained "
               "head: its layer over every verified position) per token yielded, in target forwards; timed apart "
               "from c_hat and counted in the cost-aware prediction"),
        Figure("predicted_speedup", "predicted", "Theorem 3.8's speedup from alpha_hat, gamma and c_hat",
               "{:.2f}x"),
        Figure("predicted_speedup_cost_aware", "predicted (cost)",
               "the same with the measured cost of a verify forward in place of one step", "{:.2f}x"),
        Figure("expected_tokens", "expected tokens / iteration", "Eq. 1: tokens one iteration yields at alpha_hat"),
        Figure("gamma_star", "best γ", "the draft length Theorem 3.8 predicts is fastest", "{}"),
        Figure("gamma_star_cost_aware", "best γ (cost)", "the fastest draft length with the measured T(γ+1)", "{}"),
        Figure("gamma_star_extrapolated", "best γ extrapolated", "alpha_hat near 1 on few drafts: the best γ "
               "lies where the run has no evidence", "{}"),
    ),
    draft_length="gamma",
    sweep_fixed=lambda name: {"draft_policy": "fixed"} if name == "gamma" else {},  # γ itself, not a cap
    bench_targets=(BenchTarget("theorem", "speculative speedup within 15% of the Theorem 3.8 prediction"),),
    bench_variants=((("tree_width", 2), ("tree_depth", 3)),),  # a 2x3 draft tree
    shapes=(TREE,),  # the bench's "spec[tree 2x3]"
    # assisted generation, gamma drafts per iteration on a constant schedule: exact for a linear draft
    counterpart=Counterpart(lambda p, assistant: f"transformers assisted generation ({assistant}, γ={p.gamma})",
                            assistant_tokens=lambda p: p.gamma),
    linear=lambda p: p.tree_width == 1 and p.hybrid == "off",
    describe=_describe,
    extras=_extras,
    explain=_explain,
    summary="a helper model drafts gamma tokens; the target verifies them in one forward (exact)",
))
