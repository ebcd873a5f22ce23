"""The summary of a run as it is saved: the figures a run is judged by, declared once (computed
by `decoders.analysis.summary`, which this layer does not import)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from decoders.records.bounds import NO_CONTROL, Count, Label, Ms, Positive, Prob, Ratio
from decoders.records.codec import convert

#: Top-2 logit margins below this are float32 noise between a wide forward and a one-token step.
NEAR_TIE = 1e-3


class Summary(msgspec.Struct, kw_only=True):
    """What a run bought, against its baseline. ``extras`` holds the method's own figures
    (declared by its `Figure`s: speculative decoding's alpha_hat, c_hat, predictions, ...).

    Saved flat: the method's figures beside the common ones, None figures left out (but for
    `ALWAYS_SAVED`); read by `from_json`, each figure's type checked by msgspec."""

    method: Label = "?"  # the method's name (ar, spec, pld, jacobi, lookahead)
    label: Label = ""  # the method's label as the panes show it
    finish: Label = "length"  # what stopped the method: length, eos, context or cancelled
    tokens: Count = 0
    target_forwards: Count = 0  # the target's forwards in the method's run
    baseline_forwards: Count = 0  # the target's forwards in the baseline's run
    iterations: Count = 0
    tau: Positive | None = None
    speedup_wall: Ratio | None = None  # end to end, over the tokens both runs produced (see compared_tokens)
    baseline_ms: Ms = 0.0  # the baseline's wall time, prefill included
    method_ms: Ms = 0.0  # the method's wall time, prefill included
    baseline_ms_per_token: Ms = 0.0  # the baseline's wall time per token, prefill included
    method_ms_per_token: Ms = 0.0
    target_fwd_ms: Ms = 0.0  # the baseline's mean one-token target forward
    prompt_tokens: Count | None = None  # the prompt's tokens (with the chat template when it is on)
    ttft_ms: Ms | None = None  # time to the first token: the prefill and the first iteration
    decode_ms_per_token: Ms | None = None  # after the first iteration
    baseline_ttft_ms: Ms | None = None  # the baseline's time to its first token
    baseline_decode_ms_per_token: Ms | None = None  # the baseline's decode ms/token, after its first token
    speedup_decode: Ratio | None = None  # decode tokens/s over the baseline's, rescaled by the drift
    speedup_spread: Positive | None = None  # two standard errors of the decode speedup, as a ratio
    speedup_wall_spread: Positive | None = None  # two standard errors of the end-to-end one (the prefill's noise in it)
    speedup_spread_steps: Positive | None = None  # calibrated runs: the run's own spread (step jitter only)
    calibration: dict[str, Any] | None = None  # the run-to-run noise that widened the spreads: measured, noise, runs
    compared_tokens: Count | None = None  # the first N tokens both runs produced (N < tokens: one stopped early)
    pairing: Label | None = None  # how the baseline was timed: interleaved with the method, or sequential
    speedup_decode_raw: Ratio | None = None  # sequential: the decode speedup before the drift's rescaling
    machine_change: Ratio | None = None  # interleaved: the machine's step time at the run's end over its start
    drift: Ratio | None = None  # one-token step now over the baseline's then (probe after the run)
    drift_own_steps: Count | None = None  # of the drift's pairs, the run's own one-token steps (0: the probe alone)
    probe_ms: list[Ms] | None = None  # sequential pairing: the one-token steps of the probe after the run
    verify_cost_curve: list[Positive] | None = None  # T(k), k = 1..16: a k-token forward in one-token forwards
    drafted: Count | None = None  # drafted tokens, all iterations
    accepted: Count | None = None  # drafted tokens the target accepted
    accept_rate: Prob | None = None  # accepted / judged drafts
    draft_use: Prob | None = None  # accepted / drafted (vLLM's draft acceptance rate)
    mean_acceptance_length: Positive | None = None
    per_position_acceptance: list[Prob] | None = None  # accepted at i / drafts (vLLM)
    per_position_acceptance_conditional: list[Prob | None] | None = None  # accepted at i / drafts judged at i
    acceptance_length_histogram: list[Count] | None = None  # [n]: drafts with n tokens accepted
    verify_cost: Positive | None = None  # a verify forward in one-token forwards
    # what the run's tau and its own step costs imply: decode tokens per (draft + verify) time, in
    # its own one-token steps (the baseline's where it took fewer than three); see `explain`
    implied_speedup: Ratio | None = None
    own_step_ms: Ms | None = None  # the run's own one-token decode steps, mean (None: under three)
    identical: bool | None = None
    first_divergence: Count | None = None  # where the method's output parts from the baseline's (None: identical)
    divergence: dict[str, Any] | None = None  # at, margin (top-2 logits), top2, baseline, method tokens
    # the sentence under the figures, as derived when the run was made
    explanation: Annotated[str, msgspec.Meta(max_length=1 << 16, pattern=NO_CONTROL)] = ""
    extras: dict[str, Any] = msgspec.field(default_factory=dict)

    def divergence_text(self) -> str:
        d = self.divergence or {}
        margin = d.get("margin")
        if not isinstance(margin, (int, float)) or isinstance(margin, bool) or not isinstance(d.get("at"), int):
            return ""  # not recorded (or not a figure: a hand-edited file)
        where = f"The outputs part at token {d['at']} ({d.get('baseline')!r} against {d.get('method')!r})"
        if d["margin"] < NEAR_TIE:
            return (f"{where}, where the target's top two logits are {d['margin']:.1e} apart: a numerical "
                    "near-tie that a wider forward can break the other way, not a fault of the method.")
        return (f"{where}, where the target's top two logits are {d['margin']:.2f} apart: too far for "
                "float rounding, so the method changed the output; report it as a bug.")

    def to_json(self) -> dict[str, Any]:
        plain = msgspec.to_builtins(self)
        extras = plain.pop("extras")
        return {k: v for k, v in plain.items() if v is not None or k in ALWAYS_SAVED} | extras

    @classmethod
    def from_json(cls, d: Any) -> Summary:
        """A saved summary, each figure's type checked (a hand-edited file must not crash the app
        later, far from where the bad value came in); the figures not declared here are its extras."""
        s: Summary = convert(d, cls, root="summary")
        s.extras = {k: v for k, v in d.items() if k not in cls.__struct_fields__}
        return s


#: Figures saved even when None (the app tells "not measured" from "not recorded" by them).
ALWAYS_SAVED = frozenset({"tau", "speedup_wall", "identical", "first_divergence"})
