"""``self_draft = "fastest"``: of the drafts a family offers, the one predicted to pay most here.

Which draft pays depends on the CPU more than on anything else: the int4 self-draft is accepted
about 99% of the time, but its kernel takes bf16 activations, native with AVX512-BF16 or AMX
(c about 0.5 of a float32 step) and emulated on AVX2 (c 0.7-0.9, where it cannot pay); a trained
head costs about 0.1 of a step everywhere but is accepted far less. So the choice is measured when
the family loads, on the machine at hand, in a few seconds:

* the target's one-token step and its verify-cost curve T(k) after a short passage;
* each candidate's one-token draft step, as it drafts (following the target's cache): c;
* each candidate's acceptance: the int4 copy's teacher-forced agreement with the target over the
  same passage; a trained head's held-out acceptance per depth from its ``training.json``;
* Theorem 3.8 with the measured costs at each chain length γ = 1..7; the candidate with the highest
  predicted speedup at its best γ is the draft. A head without a ``training.json`` (a published
  one) has no acceptance to judge it by and is left out, said in the record.

The record (`DraftChoice.as_dict`) says all of it; `Family.draft_choice` keeps it for the app, the
command line and saved runs.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from decoders.analysis.theory import chain_speedup

# a passage of ordinary prose for timing and agreement (written for this; not a bench prompt)
PASSAGE = ("A small workshop at the edge of town repairs old radios. Every morning the owner opens the shutters, "
           "sorts the parts that arrived the day before, and writes a list of the sets that are ready. Most of the "
           "work is patient: cleaning contacts, replacing dried capacitors, and checking each stage with a meter "
           "before the power goes on. Customers often stay to watch, and many leave with a better idea of how the "
           "sound in their kitchen is made.")
CURVE_WIDTHS = 8  # T(1..8): chains up to γ = 7
CURVE_REPEATS = 3  # medians of 3: a first forward of a new width can take 10x
STEP_REPEATS = 5
MAX_GAMMA = CURVE_WIDTHS - 1


@dataclass
class Candidate:
    kind: str
    source: str
    c: float | None = None
    accept: list[float] = field(default_factory=list)
    accept_from: str = ""
    gamma: int | None = None
    predicted: float | None = None
    left_out: str | None = None  # why it was not judged


@dataclass
class DraftChoice:
    chosen: str
    step_ms: float
    curve: list[float]
    candidates: list[Candidate]

    def as_dict(self) -> dict:
        return asdict(self)

    def sentence(self) -> str:
        """One line: what was chosen and why, with the figures."""
        best = next(c for c in self.candidates if c.kind == self.chosen)
        assert best.predicted is not None and best.gamma is not None and best.c is not None
        others = [c for c in self.candidates if c.kind != self.chosen]
        text = (f"{best.source}: predicted {best.predicted:.2f}x at γ {best.gamma} here (c {best.c:.2f}, "
                f"acceptance {best.accept[0]:.0%}, T({best.gamma + 1}) {self.curve[best.gamma]:.2f})")
        for other in others:
            if other.left_out:
                text += f"; {other.source} left out ({other.left_out})"
            else:
                text += f"; {other.source} {other.predicted:.2f}x (c {other.c:.2f}, acceptance {other.accept[0]:.0%})"
        if best.predicted is not None and best.predicted < 1.0:
            text += "; no draft is predicted to pay on this machine"
        return text


def head_acceptance(folder: str | None) -> list[float] | None:
    """The held-out acceptance per depth a head's training measured (its ``training.json``)."""
    if folder is None:
        return None
    try:
        report = json.loads((Path(folder) / "training.json").read_text(encoding="utf-8"))
        accept = [float(a) for a in report["accept_per_depth"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not accept or not all(0.0 <= a <= 1.0 for a in accept):
        return None
    return accept


def best_chain(accept: list[float], c: float, curve: list[float]) -> tuple[int, float]:
    """(γ, predicted speedup) of the best chain length for per-depth ``accept`` at cost ``c``."""
    options = [(g, chain_speedup(accept, g, c, curve[g])) for g in range(1, min(MAX_GAMMA, len(curve) - 1) + 1)]
    return max(options, key=lambda option: option[1])


def passage_ids(tokenizer) -> list[int]:
    """The timing passage's token ids."""
    return list(tokenizer(PASSAGE)["input_ids"]) if callable(tokenizer) else list(tokenizer.encode(PASSAGE))


def one_token_ms(runner, seq: list[int], filler: int) -> float:
    """Median of `STEP_REPEATS` one-token steps of ``runner`` after ``seq`` (its cache holds ``seq``)."""
    times = []
    for _ in range(STEP_REPEATS):
        runner.run(seq + [filler], keep=1)
        times.append(runner.log[-1].seconds)
        runner.crop(len(seq))
    return statistics.median(times) * 1e3


def agreement(target_runner, draft_runner, seq: list[int]) -> float:
    """Teacher-forced top-1 agreement of the draft with the target over ``seq``."""
    want = target_runner.run(seq, keep=len(seq)).argmax(-1)
    got = draft_runner.run(seq, keep=len(seq)).argmax(-1)
    return float((want == got).float().mean())


def choose(main_backend, candidates: dict[str, tuple[Any, str, list[float] | None]], seq: list[int],
           left_out: dict[str, tuple[str, str]] | None = None) -> DraftChoice:
    """Measure and choose. ``candidates``: kind -> (draft backend, its description, the acceptance per
    depth when known, else None: measured here by agreement); ``left_out``: kind -> (description, why)."""
    from decoders.analysis.timing import measure_cost_curve
    from decoders.backends.runner import KVRunner

    target = KVRunner(main_backend)
    judged: list[Candidate] = []
    for kind, (backend, source, accept) in candidates.items():
        draft = KVRunner(backend)
        candidate = Candidate(kind, source)
        if accept is None:  # a copy of the target: how often it agrees, teacher-forced
            target.reset()
            draft.reset()
            accept = [round(agreement(target, draft, seq), 4)]
            candidate.accept_from = f"teacher-forced agreement over {len(seq)} tokens"
        else:
            candidate.accept_from = "held-out acceptance from its training"
        candidate.accept = accept
        target.reset()
        draft.reset()
        draft.follow(target)  # as it drafts: the target's cache (a head: its features) first
        target.run(seq)
        candidate.c = one_token_ms(draft, seq, seq[-1])  # milliseconds for now
        draft.follow(None)
        backend.reset()
        judged.append(candidate)
    target.reset()
    target.run(seq)
    step_ms = one_token_ms(target, seq, seq[-1])
    curve = measure_cost_curve(target, seq, widths=CURVE_WIDTHS, repeats=CURVE_REPEATS)
    target.reset()
    for candidate in judged:
        candidate.c = round((candidate.c or 0.0) / step_ms, 3)
        candidate.gamma, predicted = best_chain(candidate.accept, candidate.c, curve)
        candidate.predicted = round(predicted, 3)
    best = max(judged, key=lambda c: c.predicted or 0.0)
    out = [*judged, *(Candidate(kind, source, left_out=why) for kind, (source, why) in (left_out or {}).items())]
    return DraftChoice(chosen=best.kind, step_ms=round(step_ms, 2), curve=curve, candidates=out)


def choose_for_family(spec, main_backend, main_model, tokenizer, report) -> tuple[Any, str, str, DraftChoice]:
    """Build the drafts ``spec``'s main model can have (int4, the trained head), measure, choose:
    ``(draft backend, its description, its kind, the record)``; the others are dropped."""
    from decoders.core.errors import DecodeError
    from decoders.models.backend_choice import head_folder, quantized_draft, trained_head, warm_up

    built: dict[str, tuple[Any, str, list[float] | None]] = {}
    left_out: dict[str, tuple[str, str]] = {}
    try:
        built["int4"] = (quantized_draft(main_backend, main_model, "int4"), "int4 self-draft", None)
    except DecodeError as err:
        left_out["int4"] = ("int4 self-draft", str(err).rstrip("."))
    folder = head_folder(spec.head, spec.main, missing_ok=True)
    if folder is not None:
        accept = head_acceptance(folder)
        try:
            from decoders.models.backend_choice import head_vocab_of

            head = trained_head(main_backend, main_model, folder, head_vocab_of(spec))
        except DecodeError as err:
            left_out["head"] = ("trained head", str(err).rstrip("."))
        else:
            if accept is None:
                left_out["head"] = (f"trained head ({Path(folder).name})",
                                    "no training.json beside it, so its acceptance is unknown")
            else:
                built["head"] = (head, f"trained head ({Path(folder).name})", accept)
    if not built:
        why = "; ".join(f"{source}: {reason}" for source, reason in left_out.values()) or "it has no trained head"
        raise DecodeError(f"No draft to choose the fastest of for this model ({why}); draft with --helper SRC or "
                          "--self-draft-layer L.")
    for backend, _, _ in built.values():
        warm_up(backend)
    report("Timing the drafts on this machine (which pays most here)", 0.93)
    ids = passage_ids(tokenizer)
    choice = choose(main_backend, built, ids, left_out)
    backend = built[choice.chosen][0]
    return backend, "int4 self-draft" if choice.chosen == "int4" else backend.source, choice.chosen, choice
