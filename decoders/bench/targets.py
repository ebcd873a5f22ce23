"""The benchmark's targets, each judged from the run's own figures: the measured value, met or
missed, by how much, and the figures that say why."""

from __future__ import annotations

from typing import Mapping, Sequence

from msgspec.structs import replace

from decoders.bench.aggregate import Figures, MethodStats, speedup_spread
from decoders.bench.common import BASELINE, known
from decoders.bench.entries import Sample
from decoders.bench.measure import AGAIN
from decoders.bench.prompts import group_label
from decoders.bench.reference import AR_RATIO_TARGET, ArGoal, HFReference
from decoders.bench.variants import variant_of
from decoders.core.declarations import BENCH_TARGET_KINDS, BenchTarget, Method, all_methods, get_method
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.records.codec import Record

__all__ = ["AR_RATIO_TARGET", "Target", "evaluate_targets", "is_tree"]
THM38_TOLERANCE = 0.15  # measured speculative speedup within 15% of Theorem 3.8
RECORD_OVERHEAD_TARGET = 0.05  # recording costs <= 5% of wall time
NOISE_TARGET = 0.03  # autoregressive against its own baseline: spread under 3% (idle machine)
MIN_RUNS_TO_JUDGE = 4  # prompt runs below which no target is called met or missed


class Target(Record):
    """One row of the targets table."""

    key: str
    target: str
    goal: str
    value: str
    met: bool | None
    margin: str
    note: str = ""


def evaluate_targets(figures: Figures, rows: Mapping[str, str] | Sequence[str], samples: Sequence[Sample],
                     floor_ms: float | None = None, goal: ArGoal | None = None) -> list[Target]:
    """Every target the run has the figures for, in the order the report lists them.

    ``rows``: each row's label and the method it runs (a plain list of method names: each its own label).
    ``goal``: what our AR is judged by against the reference's (default transformers' `HFReference.ar_goal`);
    the counterpart targets name the same side."""
    rows = dict(rows) if isinstance(rows, Mapping) else {m: m for m in rows}
    goal = goal or HFReference.ar_goal
    targets = [_ar_target(figures.overall[BASELINE], samples, floor_ms, goal),
               _noise_target(figures.overall.get(AGAIN), samples)]
    for kind in BENCH_TARGET_KINDS:  # the methods' declared targets (`Method.bench_targets`), kind by kind
        for method in all_methods():
            labels = [label for label, name in rows.items() if name == method.name]
            for declared in (t for t in method.bench_targets if t.kind == kind and labels):
                targets += _declared_targets(declared, method, labels, figures, goal.other)
    targets += [_record_target(label, method, figures.overall[label], samples) for label, method in rows.items()]
    judged = [t for t in targets if t is not None]
    if len(samples) < MIN_RUNS_TO_JUDGE:  # a figure from a prompt or two is an anecdote, not a verdict
        judged = [replace(t, met=None, margin=f"too few runs to judge ({len(samples)} prompt runs; "
                          f"{MIN_RUNS_TO_JUDGE} or more judge it); as measured: {t.margin}")
                  if t.met is not None else t for t in judged]
    return judged


def _declared_targets(declared: BenchTarget, method: Method, labels: list[str],
                      figures: Figures, other: str = "transformers") -> list[Target | None]:
    """The rows of one target ``method`` declares, judged on its rows ``labels``."""
    plain = method.name
    if declared.kind == "counterpart":
        return list(_counterpart_targets(figures.groups, method, other)) if plain in labels else []
    if declared.kind == "theorem":
        return [_theorem_target(label, method, declared.text, figures.overall.get(label))
                for label in labels if not is_tree(label)]
    if declared.kind == "variants_beat_plain":
        return [_beats_target(figures.groups, label, plain, declared.text, strict=False)
                for label in labels if label != plain]
    if plain not in labels:
        return []
    return [_beats_target(figures.groups, plain, declared.other, declared.text, strict=True)]


def is_tree(label: str) -> bool:
    """Whether a row drafts a tree (its method's `Method.linear` on the row's parameters): Theorem
    3.8 assumes one linear draft, so it predicts nothing there."""
    variant = variant_of(label)
    try:
        params = DecodeParams(method=variant.method, **dict(variant.overrides))
        return not get_method(variant.method).drafts_linearly(params)
    except (DecodeError, TypeError):  # a row of a method (or parameter) this version does not have
        return False


def _beats_target(groups: dict[str, dict[str, MethodStats]], label: str, other: str, name: str,
                  strict: bool) -> Target | None:
    """``label``'s speedup against ``other``'s on every task group where both ran."""
    pairs: list[tuple[str, float, float]] = []
    for g, per in groups.items():
        if label in per and other in per:
            mine, theirs = per[label].ours.speedup, per[other].ours.speedup
            if mine is not None and theirs is not None:
                pairs.append((g, mine, theirs))
    if not pairs:
        return None
    behind = [(g, a, b) for g, a, b in pairs if (a <= b if strict else a < b)]
    worst_group, a, b = min(pairs, key=lambda p: p[1] - p[2])
    return Target(
        f"{label}_vs_{other}", name, ("> " if strict else ">= ") + f"{other} on every group",
        ", ".join(f"{group_label(g)} {a:.2f}x vs {b:.2f}x" for g, a, b in pairs), not behind,
        f"behind on {len(behind)}/{len(pairs)} groups, worst {group_label(worst_group)} {a - b:+.2f}" if behind
        else f"all {len(pairs)} groups met (smallest gap {a - b:+.2f})", "")


def _ar_target(ar: MethodStats, samples: Sequence[Sample], floor_ms: float | None,
               goal: ArGoal = HFReference.ar_goal) -> Target | None:
    ratio = known(ar.ratio_ms_per_token)
    if ratio is None or ar.theirs is None:
        return None
    value = f"{ratio:.2f}x ({ar.ours.ms_per_token:.1f} vs {ar.theirs.ms_per_token:.1f} ms/token)"
    ours_decode, theirs_decode = ar.ours.decode_ms_per_token, ar.theirs.decode_ms_per_token
    if goal.decode and ours_decode and theirs_decode:  # the loop alone; the prefill said beside it
        value = (f"{ours_decode / theirs_decode:.2f}x on decode ({ours_decode:.1f} vs {theirs_decode:.1f} ms/token "
                 f"after the first token); with the prefill {value}")
        ratio = ours_decode / theirs_decode
    same = sum(1 for s in samples if s.ours[BASELINE].ids == s.theirs[BASELINE].ids)
    limit = goal.limit
    met = ratio <= limit
    margin = (f"{limit - ratio:.2f} under the limit" if met else
              f"missed by {ratio - limit:.2f} ({ratio / limit - 1:+.0%} over the limit)")
    note = f"same tokens out on {same}/{len(samples)} prompt runs"
    step = ar.ours.decode_step_ms
    if floor_ms and step:
        note += (f"; our one-token decode step is {step:.1f} ms, {step / floor_ms:.1f}x "
                 f"the {floor_ms:.3g} ms bandwidth floor")
    return Target(goal.key, goal.text, f"<= {limit:.2f}x", value, met, margin, note)


def _noise_target(again: MethodStats | None, samples: Sequence[Sample]) -> Target | None:
    """Autoregressive decoding against its own baseline: 1.00x inside the reported spread, on the
    pooled figure and on each prompt, and the spread itself under `NOISE_TARGET`."""
    speedup, spread = (again.ours.speedup, again.ours.speedup_spread) if again else (None, None)
    if speedup is None or spread is None:
        return None
    inside = [abs(e.speedup - 1.0) <= (speedup_spread([e], e.speedup) or 0.0)
              for e in (s.ours[AGAIN] for s in samples if AGAIN in s.ours) if e.speedup]
    pooled_in = abs(speedup - 1.0) <= spread
    met = pooled_in and spread < NOISE_TARGET and all(inside)
    why = [] if pooled_in else [f"{speedup:.2f}x is outside its spread"]
    if spread >= NOISE_TARGET:
        why.append(f"spread {spread:.3f} over the {NOISE_TARGET:.2f} limit")
    if not all(inside):
        why.append(f"outside its spread on {len(inside) - sum(inside)}/{len(inside)} prompts")
    return Target("ar_noise", "autoregressive against its own baseline (the same decode on both sides)",
                  f"1.00x inside the spread, spread < {NOISE_TARGET:.2f}", f"{speedup:.3f}x +/- {spread:.3f}", met,
                  "; ".join(why) if why else f"spread {NOISE_TARGET - spread:.3f} under the limit",
                  f"inside its own spread on {sum(inside)}/{len(inside)} prompts; the noise floor of every speedup "
                  "in this run (on a busy machine it widens, as it should)")


def _possessive(name: str) -> str:
    return name + ("'" if name.endswith("s") else "'s")


def _counterpart_targets(groups: dict[str, dict[str, MethodStats]], method: Method,
                         other: str = "transformers") -> list[Target]:
    """``method`` against its counterpart (``other``'s) on every task group, and against autoregressive decoding."""
    targets = []
    name, noun = method.name, method.noun or method.label.lower()
    rows = [(g, per[name]) for g, per in groups.items() if name in per and per[name].theirs is not None]
    theirs = _possessive(other)
    for key, text, field in ((f"{name}_tau", f"{noun} tau >= {theirs} on every task group", "tau"),
                             (f"{name}_speedup", f"{noun} speedup >= {theirs} on every task group", "speedup")):
        if not rows:
            break
        figures = {g: (getattr(st.ours, field) or 0, getattr(st.theirs, field) or 0) for g, st in rows}
        gaps = [(g, ours - theirs) for g, (ours, theirs) in figures.items()]
        worst_group, worst = min(gaps, key=lambda gap: gap[1])
        missed = [g for g, gap in gaps if gap < 0]
        note = "; ".join(f"{group_label(g)}: ours {figures[g][0]:.2f} vs {other} {figures[g][1]:.2f}"
                         for g in missed)
        targets.append(Target(
            key, text, f"ours - {other} >= 0 on every group",
            ", ".join(f"{group_label(g)} {gap:+.2f}" for g, gap in gaps), not missed,
            f"missed on {len(missed)}/{len(gaps)} groups, worst {group_label(worst_group)} {worst:+.2f}" if missed
            else f"all {len(gaps)} groups met (smallest gap {worst:+.2f})", note))
    speed: list[tuple[str, float]] = []
    for g, per in groups.items():
        value = per[name].ours.speedup if name in per else None
        if value is not None:
            speed.append((g, value))
    if speed:
        slow = [g for g, s in speed if s < 1.0]
        worst_group, worst = min(speed, key=lambda item: item[1])
        why = []
        for g in slow:
            st = groups[g][name].ours
            why.append(f"{group_label(g)}: tau {st.tau or 0:.2f}, acceptance {known(st.acceptance) or 0:.2f}, "
                       f"a verify forward costs {st.verify_cost or 0:.2f}x a one-token step")
        targets.append(Target(
            f"{name}_not_slower", f"{noun} never slower than autoregressive on any task group",
            ">= 1.00x on every group", ", ".join(f"{group_label(g)} {s:.2f}x" for g, s in speed), not slow,
            f"slower on {len(slow)}/{len(speed)} groups, worst {group_label(worst_group)} {worst:.2f}x "
            f"(missed by {1 - worst:.2f})" if slow else
            f"all groups met, slowest {group_label(worst_group)} {worst:.2f}x", "; ".join(why)))
    return targets


def _theorem_target(label: str, method: Method, text: str, spec: MethodStats | None) -> Target | None:
    theorem = spec.ours.theorem if spec is not None else None
    if spec is None or theorem is None or not theorem.predicted_speedup:
        return None
    ours = spec.ours
    broken = theorem.premise_broken()
    if broken:
        return Target(f"{method.name}_thm38" + ("" if label == method.name else f":{label}"),
                      text + ("" if label == method.name else f", {label}"),
                      f"measured within {THM38_TOLERANCE:.0%} of predicted",
                      f"measured {ours.speedup:.2f}x vs predicted {theorem.predicted_speedup:.2f}x", None,
                      "not judged: " + broken, "a fixed-γ row is judged: add --methods 'spec[draft_policy=fixed]'")
    measured, predicted, aware = ours.speedup, theorem.predicted_speedup, theorem.predicted_speedup_cost_aware
    assert measured is not None  # a predicted row was measured
    error = measured / predicted - 1
    aware_note = (f"cost-aware prediction {aware:.2f}x (measured {measured / aware - 1:+.0%} off it, verify cost "
                  f"{ours.verify_cost or 0:.2f} one-token forwards)" if aware else "")
    within = abs(error) <= THM38_TOLERANCE
    return Target(
        f"{method.name}_thm38" + ("" if label == method.name else f":{label}"),
        text + ("" if label == method.name else f", {label}"),
        f"measured within {THM38_TOLERANCE:.0%} of predicted",
        f"measured {measured:.2f}x vs predicted {predicted:.2f}x "
        f"(alpha {theorem.alpha_hat:.2f}, c {theorem.c_hat:.2f})",
        within, f"{error:+.0%} off the prediction" + ("" if within else
                                                     f" (missed by {abs(error) - THM38_TOLERANCE:.0%})"),
        aware_note)


def _record_target(label: str, method: str, stats: MethodStats, samples: Sequence[Sample]) -> Target | None:
    overhead = stats.overhead
    if overhead is None:
        return None
    runs = sum(1 for s in samples if label in s.record_on)
    met = overhead <= RECORD_OVERHEAD_TARGET
    return Target(
        f"record_overhead_{label}",
        "recording overhead, " + (get_method(method).label.lower() if label == method else label),
        f"<= {RECORD_OVERHEAD_TARGET:.0%} of wall time", f"{overhead:+.1%}", met,
        f"{RECORD_OVERHEAD_TARGET - overhead:.1%} to spare" if met else
        f"missed by {overhead - RECORD_OVERHEAD_TARGET:.1%}",
        f"total wall time of {runs} record=True runs against their record=False twins")
