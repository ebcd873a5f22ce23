"""What a freshly trained head buys on this machine: one short speculative run with it, and
Theorem 3.8 (cost-aware) from its held-out acceptance and the run's measured costs.

The run gives c_hat (one head step in target one-token steps) and T(k), the verify-cost curve,
measured in the same minutes; the held-out chain acceptance comes from training. Both
predictions and the run's own speedup over autoregressive decoding (with its spread) are
returned, so `train-head` can say whether the head pays here before anyone benches it.
"""

from __future__ import annotations

PROMPT = "Write a short paragraph about why people enjoy walking in the mountains."  # none of the bench's


def heldout_speedup(accept_per_depth: list[float], gamma: int, c: float, verify_cost: float,
                    per_token: float = 0.0) -> float:
    """Theorem 3.8 with the measured verify cost and catch-up, at the held-out per-depth
    acceptance (`decoders.analysis.theory.chain_speedup`)."""
    from decoders.analysis.theory import chain_speedup

    return chain_speedup(accept_per_depth, gamma, c, verify_cost, per_token)


def on_this_machine(engine, accept_per_depth: list[float], gamma: int, max_new_tokens: int = 48,
                    prompt: str = PROMPT) -> dict:
    """A fixed-length speculative run with the head ``engine``'s family drafts with; its figures
    beside the two predictions (the run's own alpha_hat, and the held-out acceptance)."""
    from decoders.core.params import DecodeParams

    params = DecodeParams("spec", gamma=gamma, max_new_tokens=max_new_tokens, draft_policy="fixed")
    result = engine.run(prompt, params)
    s = result.summary
    x = s.extras
    curve = s.verify_cost_curve
    verify = curve[gamma] if curve and len(curve) > gamma else s.verify_cost
    u = x.get("catch_up_cost") or 0.0
    out = {"gamma": gamma, "tokens": max_new_tokens, "c_hat": x.get("c_hat"), "catch_up_cost": u,
           "alpha_hat": x.get("alpha_hat"),
           "tau": s.tau, "verify_cost": round(verify, 3) if verify is not None else None,
           "predicted_run": x.get("predicted_speedup_cost_aware"),
           "speedup": s.speedup_decode, "speedup_spread": s.speedup_spread}
    if verify is not None and x.get("c_hat") is not None:
        out["predicted_heldout"] = round(heldout_speedup(accept_per_depth, gamma, x["c_hat"], verify, u), 3)
        # the acceptance at which this chain would break even here: a1 = a2 = ... = a
        out["break_even_alpha"] = next((round(a / 100, 2) for a in range(101)
                                        if heldout_speedup([a / 100], gamma, x["c_hat"], verify, u) >= 1.0), None)
    return out


def sentence(figures: dict) -> str:
    """One line for the end of `train-head`."""
    f = figures
    parts = [f"on this machine (γ {f['gamma']}, {f['tokens']} tokens): one head step costs {f['c_hat']:.2f} target "
             f"steps (its catch-up {f.get('catch_up_cost') or 0:.2f} per token), a {f['gamma'] + 1}-token verify "
             f"{f['verify_cost']:.2f}" if f.get("verify_cost") is not None
             else f"on this machine (γ {f['gamma']}, {f['tokens']} tokens): one head step costs {f['c_hat']:.2f}"]
    if f.get("predicted_heldout") is not None:
        parts.append(f"Theorem 3.8 (cost-aware) predicts {f['predicted_heldout']:.2f}x at the held-out acceptance")
    if f.get("break_even_alpha") is not None:
        parts.append(f"breaking even at acceptance {f['break_even_alpha']:.0%}")
    if f.get("speedup") is not None:
        spread = f" +/- {f['speedup_spread']:.2f}" if f.get("speedup_spread") is not None else ""
        parts.append(f"the run itself: tau {f['tau'] or 0:.2f}, {f['speedup']:.2f}x{spread} over autoregressive")
    return "; ".join(parts)
