"""The sentence under a run's figures: the headline's verdict (`decoders.analysis.verdict.headline`,
the figure, spread and verdict every surface shows) taken as given, then why, from the run's own
figures: what binds where it did not pay (`decoders.analysis.cause`), and where the speedup its
own tau and step costs imply (`Summary.implied_speedup`) differs from the measured one beyond the
spread, whose steps were slower. It never states a verdict the headline does not hold
(`tests/engine/test_sentence.py` checks it over synthetic and saved runs)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from decoders.analysis.cause import Cause, forward_cause, helper_cause
from decoders.analysis.verdict import Headline, headline, ratio_text, reads_faster, verdict
from decoders.core.declarations import baseline_method, get_method
from decoders.core.errors import DecodeError
from decoders.records.summary import Summary

if TYPE_CHECKING:
    from decoders.core.declarations import Method

#: An interleaved run whose machine moved more than this share is told so (the ratio holds).
MACHINE_MOVED = 0.10


def sentence(s: Summary, threshold: float = 0.0) -> str:
    """The sentence shown under ``s``'s figures: derived from them now (`explain`, with the divergence
    the engine adds), so that a saved run's sentence says what its headline says whatever the
    version that saved it wrote. A method this install does not have, or whose saved figures its
    own words cannot read (a file from an older version, a hand-edited one), is told in the words
    every method has."""
    try:
        method_def: Method | None = get_method(s.method)
    except DecodeError:
        method_def = None
    try:
        derived = explain(s, method_def, threshold)
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError):
        derived = explain(s, method_def, threshold, own_words=False)
    return f"{derived} {s.divergence_text()}".strip()


def explain(s: Summary, method_def: Method | None, threshold: float = 0.0, own_words: bool = True) -> str:
    """The sentence under the figures: the headline's verdict (`verdict.headline`: the figure above
    it, its spread and ``threshold``, taken as given), then why, from the run's own figures: what
    binds where it did not pay (`cause`), and where the speedup its own tau and step costs imply
    differs from the measured one beyond the spread, what that says. It never states a verdict
    the headline does not hold. ``own_words``: the method's own account of its figures (its
    `Method.explain`), else the words every method has (so has a method this install lacks)."""
    h = headline(s, threshold)
    return f"{_why(s, method_def, h, own_words)} {_machine(s)}".strip()


def _machine(s: Summary) -> str:
    if s.pairing == "interleaved" and s.machine_change is not None and abs(s.machine_change - 1) >= MACHINE_MOVED:
        return (f"The machine's step time moved {s.machine_change:.2f}x during the run; the baseline stepped in "
                "alternation with it, so both saw the change and the ratio holds.")
    return ""


def _opening(s: Summary, h: Headline) -> str:
    assert h.speedup is not None
    if h.verdict == "withheld":
        raw = f", {s.speedup_decode_raw:.2f}x raw" if s.speedup_decode_raw is not None else ""
        opening = (f"the machine's speed changed during the run (its steps took {s.drift:.2f}x as long after it as "
                   f"in the baseline before it), so no verdict: {h.speedup:.2f}x corrected{raw}; run again, or pair "
                   "the baseline interleaved")
    else:
        opening = ratio_text(h.speedup, h.spread, v=h.verdict)
    if s.compared_tokens is not None and (s.compared_tokens < s.tokens or s.finish == "cancelled"):
        opening += f", over the first {s.compared_tokens} tokens"
    return opening[0].upper() + opening[1:]


def _why(s: Summary, method_def: Method | None, h: Headline, own_words: bool) -> str:
    if h.speedup is None:
        return "No tokens were timed."
    opening = _opening(s, h)
    if s.method == baseline_method().name:
        return f"{opening}: {_autoregressive(s, h)}."
    cost = s.verify_cost
    cost_txt = f"a verify forward cost {cost:.2f}x a one-token step" if cost else "no forward verified a draft"
    if own_words and method_def is not None and method_def.explain is not None:
        body = method_def.explain(s, cost_txt)
    else:
        noun = (method_def.noun or method_def.label.lower()) if method_def is not None else s.label or s.method
        body = (f"{noun} emitted {s.tau or 0.0:.2f} tokens per target forward, "
                f"{s.accepted or 0} of {s.drafted or 0} drafted tokens accepted, and {cost_txt}")
    parts = [body]
    if h.verdict != "withheld" and not reads_faster(h):  # it did not pay: what binds
        found = cause_of(s)
        if found is not None:
            parts.append(found.words)
    forward = _forward_cost(s)
    own = s.implied_speedup or (forward[0] / forward[1] if forward else None)  # a saved run from before
    remark = _unaccounted(s, h, own)
    if remark:
        parts.append(remark)
    return f"{opening}: {'; '.join(parts)}."


def _autoregressive(s: Summary, h: Headline) -> str:
    """Autoregressive decoding against itself should read 1.00x: inside the spread the gap is
    noise; beyond it, whose steps were slower."""
    assert h.speedup is not None
    said = (f"autoregressive decoding is the baseline itself, one target forward per token "
            f"({s.decode_ms_per_token or s.method_ms_per_token:.1f} ms/token here against "
            f"{s.baseline_decode_ms_per_token or s.baseline_ms_per_token:.1f} in the baseline run)")
    if h.verdict == "even":
        return f"{said}, so any gap is timing noise"
    if h.verdict in ("unknown", "withheld"):
        return f"{said}, so it should read 1.00x (no spread measured to judge a gap by)"
    return f"{said}, so it should read 1.00x, and {h.speedup:.2f}x is beyond the spread: {_whose(s, h.speedup > 1.0)}"


def _unaccounted(s: Summary, h: Headline, implied_speed: float | None) -> str:
    """Where the speedup the run's own tau and step costs imply differs from the measured one
    beyond the spread (and the threshold), what that says; "" where they agree, or where either
    is not measured."""
    if (implied_speed is None or implied_speed <= 0 or h.speedup is None or h.spread is None
            or h.verdict in ("unknown", "withheld")):
        return ""
    if verdict(h.speedup / implied_speed, h.spread / implied_speed, h.threshold) in ("even", "unknown"):
        return ""
    higher = h.speedup > implied_speed
    return (f"its own tau and step costs imply {implied_speed:.2f}x, {'below' if higher else 'above'} the measured "
            f"{h.speedup:.2f}x beyond the spread: {_whose(s, higher)}")


def _whose(s: Summary, higher: bool) -> str:
    """Why a measured speedup is ``higher`` (or lower) than the run's own figures account for."""
    own, base = s.own_step_ms, s.target_fwd_ms
    if higher:
        if own and base and base > own:
            return (f"the baseline's one-token steps ({base:.1f} ms) were slower than this run's own ({own:.1f} ms): "
                    "timing noise or interference")
        return "the baseline took longer per token than this run's own steps account for: timing noise or interference"
    if own and base and own > base:
        return (f"this run's own one-token steps ({own:.1f} ms) were slower than the baseline's ({base:.1f} ms): "
                "timing noise or interference")
    if s.method == baseline_method().name:
        return "this run took longer per token than its own steps account for: timing noise or interference"
    return ("this run spent time its forwards do not account for (the method's work between steps), or its steps "
            "were slowed: timing noise or interference")


def _number(value: Any) -> float | None:
    """A saved figure as a float (a method's extras are not declared types: a hand-edited file may
    hold anything there)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _decode_tau(s: Summary) -> float | None:
    """Tokens per decode forward: the first iteration (the prefill, one token) left out, as the
    decode speedup and `implied` leave it out."""
    if s.iterations > 1 and s.tokens > 1:
        return (s.tokens - 1) / (s.iterations - 1)
    return s.tau


def _forward_cost(s: Summary) -> tuple[float, float, float | None] | None:
    """A method that drafts with nothing: (tokens per decode forward; what a decode forward cost on
    average, in one-token steps; the tokens a drafting forward would yield with every draft
    accepted, None: not known). The cost from the run's own steps where measured (`implied`), else
    its drafting forwards at the verify cost and the rest at one step (a saved run from before);
    None where neither is there, or for a method with a helper."""
    tau = _decode_tau(s)
    if "c_hat" in s.extras or not tau or not s.drafted:
        return None
    hist = s.acceptance_length_histogram
    drafts = sum(hist) if hist else None
    most = s.drafted / drafts + 1 if drafts else None
    if s.implied_speedup:  # the forward's cost measured in the run's own steps
        return tau, tau / s.implied_speedup, most
    if s.verify_cost and drafts and s.iterations:
        return tau, (drafts * s.verify_cost + max(s.iterations - drafts, 0)) / s.iterations, most
    if s.verify_cost:
        return tau, s.verify_cost, most
    return None


def cause_of(s: Summary) -> Cause | None:
    """What binds the run, from its own figures: Theorem 3.8's inputs (alpha_hat, c_hat, gamma, the
    measured T(gamma+1)) where a helper drafted a linear draft; tau against the forward's cost for a
    method that drafts with nothing; None where they are not there (a draft tree, nothing
    drafted, a saved run from before)."""
    x = s.extras
    if "tree" in x or not s.drafted:
        return None
    alpha, c = _number(x.get("alpha_hat")), _number(x.get("c_hat"))
    if alpha is not None and c is not None:
        gamma = _number(x.get("gamma_used")) or _number(x.get("gamma"))
        if gamma is None or not 1 <= gamma <= 1 << 16:
            return None
        T = s.verify_cost_curve
        verify = T[int(gamma)] if T and len(T) > gamma else s.verify_cost
        if verify is None:
            return None
        return helper_cause(alpha, int(gamma), c, verify, _number(x.get("catch_up_cost")) or 0.0)
    forward = _forward_cost(s)
    if forward is None:
        return None
    return forward_cause(forward[0], forward[1], forward[2], s.verify_cost)
