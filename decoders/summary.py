"""The figures a run is judged by, computed from the method run and its baseline."""

from __future__ import annotations

from typing import Any

from decoders.params import DecodeParams
from decoders.records import KIND_ACCEPTED, Run
from decoders.theory import best_gamma, cost_aware_speedup, expected_tokens, predicted_speedup, speedup_curve


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first token where ``a`` and ``b`` differ (a length difference counts)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def summarize(method: Run, baseline: Run, params: DecodeParams) -> dict[str, Any]:
    emitted = len(method.ids)
    target_forwards = method.n_forward.get("main", 0)
    base_ms = baseline.time_ms["wall"]
    base_fwd = baseline.time_ms.get("main_fwd_mean") or 0.0
    s: dict[str, Any] = {
        "method": method.method,
        "label": method.label,
        "finish": method.finish,
        "tokens": emitted,
        "target_forwards": target_forwards,
        "baseline_forwards": baseline.n_forward.get("main", 0),
        "iterations": len(method.iters),
        "tau": round(emitted / target_forwards, 3) if target_forwards else None,
        "speedup_wall": round(base_ms / method.time_ms["wall"], 3) if method.time_ms["wall"] > 0 else None,
        "baseline_ms": round(base_ms, 2),
        "method_ms": round(method.time_ms["wall"], 2),
        "baseline_ms_per_token": round(base_ms / max(len(baseline.ids), 1), 2),
        "method_ms_per_token": round(method.time_ms["wall"] / max(emitted, 1), 2),
        "target_fwd_ms": round(base_fwd, 3),
    }
    drafted = sum(len(it.draft) for it in method.iters)
    verified = sum(min(it.n_accepted + 1, len(it.draft)) for it in method.iters)
    accepted = sum(1 for k in method.kinds if k == KIND_ACCEPTED)
    if method.method != "ar":
        s["drafted"] = drafted
        s["accepted"] = accepted
        # share of drafts the target judged that it accepted (drafts after a rejection are never judged)
        s["accept_rate"] = round(accepted / verified, 3) if verified else None
        s["draft_use"] = round(accepted / drafted, 3) if drafted else None
        # iteration 0 also prefills the prompt: leave it out of the per-step cost
        multi = [it.t_verify_ms for it in method.iters[1:] if it.draft]
        if multi and base_fwd:
            # how many one-token forwards a verify forward costs; the theorem assumes 1
            s["verify_cost"] = round(sum(multi) / len(multi) / base_fwd, 3)
    if method.method == "spec":
        betas = [b for it in method.iters for b in it.beta]
        alpha = sum(betas) / len(betas) if betas else 0.0
        helper_fwd = method.time_ms.get("helper_fwd_mean") or 0.0
        c = helper_fwd / base_fwd if base_fwd else 0.0
        gamma = params.gamma
        curve = speedup_curve(alpha, c)
        s.update({
            "gamma": gamma,
            "alpha_hat": round(alpha, 3),
            "c_hat": round(c, 3),
            "predicted_speedup": round(predicted_speedup(alpha, gamma, c), 3),
            "expected_tokens": round(expected_tokens(alpha, gamma), 3),
            "curve": curve,
            "gamma_star": best_gamma(curve),
        })
        if "verify_cost" in s:
            s["predicted_speedup_cost_aware"] = round(cost_aware_speedup(alpha, gamma, c, s["verify_cost"]), 3)
    if method.method == "pld":
        s["draft_hits"] = sum(1 for it in method.iters if it.draft)
    if method.method == "jacobi":
        s["block"] = params.block
    if params.greedy:
        div = first_divergence(baseline.ids, method.ids) if method.finish != "cancelled" else \
            first_divergence(baseline.ids[: len(method.ids)], method.ids)
        s["identical"] = div is None
        s["first_divergence"] = div
    s["explanation"] = explain(s)
    return s


def explain(s: dict[str, Any]) -> str:
    """One sentence that says why the run was faster or slower, from its own figures."""
    speed = s.get("speedup_wall")
    if speed is None:
        return "No tokens were timed."
    if s["method"] == "ar":
        return (f"Autoregressive decoding is the baseline itself: one target forward per token "
                f"({s['method_ms_per_token']:.1f} ms/token here against {s['baseline_ms_per_token']:.1f} ms/token "
                f"in the baseline run), so any gap from 1.00x is timing noise.")
    tau = s.get("tau") or 0.0
    cost = s.get("verify_cost")
    verb = "faster" if speed >= 1.0 else "slower"
    cost_txt = f"a verify forward cost {cost:.2f}x a one-token step" if cost else "verify forwards were cheap"
    if s["method"] == "spec":
        c = s["c_hat"]
        why = (f"{tau:.2f} tokens per target forward (alpha≈{s['alpha_hat']:.2f}) against a draft cost of "
               f"{s['gamma']} x {c:.2f} target forwards per iteration and {cost_txt}")
        if c >= 0.5:
            why += "; a helper this expensive relative to the target cannot pay for itself"
        return f"{speed:.2f}x {verb} than autoregressive: {why}."
    name = "prompt lookup" if s["method"] == "pld" else "Jacobi iteration"
    return (f"{speed:.2f}x {verb} than autoregressive: {name} emitted {tau:.2f} tokens per target forward, "
            f"{s.get('accepted', 0)} of {s.get('drafted', 0)} drafted tokens accepted, and {cost_txt}.")
