"""``self_draft = "fastest"``: of the drafts a family offers, the one predicted to pay most here.

Which draft pays depends on the CPU more than on anything else: the int4 self-draft is accepted
about 99% of the time, but its kernel takes bf16 activations, native with AVX512-BF16 or AMX
(c about 0.5 of a float32 step) and emulated on AVX2 (c 0.7-0.9, where it cannot pay); a trained
head costs about 0.1 of a step everywhere but is accepted far less. So the choice is measured on
the machine at hand, in a few seconds, once: `decoders.models.kept_choice` keeps it per machine.

* the target's one-token step and its verify-cost curve T(k) after a short passage;
* each candidate's one-token draft step, as it drafts (following the target's cache): c;
* each candidate's acceptance per depth, measured as it will be used: greedy speculative decoding
  (γ `ACCEPT_GAMMA`) of a few requests of the kinds people send, from the project's own prompt
  sets (`choice_prompts`: never the bench's Spec-Bench prompts, nor the ones the shipped head was
  trained on), with the chat template. A head's held-out acceptance from its training is not used:
  it is measured on answers like those it learned (45% for the shipped head), and on requests it
  was accepted 0-24%;
* Theorem 3.8 with the measured costs at each chain length γ = 1..7; the candidate with the highest
  predicted speedup at its best γ is the draft.

The record (`DraftChoice.as_dict`) says all of it; `Family.draft_choice` keeps it for the app, the
command line and saved runs.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decoders.analysis.theory import chain_speedup

if TYPE_CHECKING:
    from decoders.backends.hf import Backend

# a passage of ordinary prose for timing and agreement (written for this; not a bench prompt)
PASSAGE = ("A small workshop at the edge of town repairs old radios. Every morning the owner opens the shutters, "
           "sorts the parts that arrived the day before, and writes a list of the sets that are ready. Most of the "
           "work is patient: cleaning contacts, replacing dried capacitors, and checking each stage with a meter "
           "before the power goes on. Customers often stay to watch, and many leave with a better idea of how the "
           "sound in their kitchen is made.")
#: The longest chain the choice weighs; its cost curve is T(1..MAX_GAMMA + 1), shorter than the one
#: measured after a run (`decoders.analysis.timing.CURVE_WIDTHS`): the choice is made while a model loads.
MAX_GAMMA = 7
CHOICE_REPEATS = 3  # medians of 3: a first forward of a new width can take 10x
STEP_REPEATS = 5
#: The acceptance measurement: greedy speculative decoding of `choice_prompts`, each for
#: `ACCEPT_TOKENS` new tokens with chains of `ACCEPT_GAMMA` drafts (the app's default γ): about
#: 30-50 target steps per candidate, 1-2 s for the bundled model on one core.
ACCEPT_GAMMA = 4
ACCEPT_TOKENS = 12


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


def choice_prompts() -> list[str]:
    """Requests of the kinds people send, from the project's own prompt sets
    (`decoders.training.prompts`): a question, a short paragraph and a letter, taken from the end
    of each set, far beyond the prompts the shipped head's corpus answered (`corpus/`: the first
    552 and 320), and none from the bench's Spec-Bench prompts."""
    from decoders.training.prompts import more_prompts, training_prompts

    first = training_prompts()
    return [more_prompts()[-6], first[-3], first[-6]]


def choice_prompt_ids(tokenizer, most: int) -> list[list[int]]:
    """`choice_prompts` as the app sends them (one user message in the chat template when the
    tokenizer has one), each cut to its last ``most`` tokens."""
    prompts = []
    for text in choice_prompts():
        if getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                 tokenize=False)
            ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        else:
            ids = list(tokenizer(text)["input_ids"]) if callable(tokenizer) else list(tokenizer.encode(text))
        prompts.append(ids[-most:])
    return prompts


@dataclass
class Acceptance:
    """What a draft's greedy speculative decoding of the choice prompts gave: per depth d, the
    drafts at depth d that were judged (their chain accepted up to d) and accepted."""

    judged: list[int]
    accepted: list[int]

    def per_depth(self) -> list[float]:
        """Acceptance at depth d given depths 1..d-1 accepted, for the depths judged at all."""
        return [round(a / j, 4) for a, j in zip(self.accepted, self.judged, strict=True) if j] or [0.0]

    def text(self, prompts: int, tokens: int) -> str:
        drafted, taken = sum(self.judged), sum(self.accepted)
        return (f"greedy speculative decoding (γ {len(self.judged)}) of {prompts} requests from the project's prompt "
                f"sets, {tokens} tokens: {taken} of {drafted} drafts judged were accepted")


def measure_acceptance(main_backend: Backend, draft_backend: Backend, prompts: list[list[int]], stop_ids=frozenset(),
                       new_tokens: int = ACCEPT_TOKENS, gamma: int = ACCEPT_GAMMA) -> tuple[Acceptance, int]:
    """Greedy speculative decoding of each prompt (`decoders.methods.speculative`'s loop, chains of
    ``gamma``), counting per depth the drafts judged and accepted; returns them and the tokens made."""
    import torch

    from decoders.backends.capabilities import CappedDraft
    from decoders.backends.runner import KVRunner
    from decoders.methods.shared.common import draft_chain
    from decoders.methods.shared.verify import accept_prefix

    target, draft = KVRunner(main_backend), KVRunner(draft_backend)
    if isinstance(draft_backend, CappedDraft):  # Medusa: no head beyond its last
        gamma = min(gamma, draft_backend.max_draft)
    gamma = max(1, gamma)
    counts = Acceptance([0] * gamma, [0] * gamma)
    made = 0
    for prompt in prompts:
        target.reset()
        draft.reset()
        draft.follow(target)
        seq = list(prompt)
        seq.append(int(target.run(seq)[0].argmax()))
        end = len(prompt) + new_tokens
        while len(seq) < end and seq[-1] not in stop_ids:
            drafts, _ = draft_chain(draft, seq, gamma, lambda row: (row.argmax().view(1), None))
            chain = torch.cat(drafts)
            verdict = accept_prefix(target.run(seq, keep=gamma + 1, tail=chain).argmax(-1), chain)
            n, nxt, ids = int(verdict.n_accepted), int(verdict.next_token), [int(t) for t in chain.tolist()]
            draft.name_tail(ids[: gamma - 1])
            target.name_tail(ids)
            for depth in range(min(n + 1, gamma)):
                counts.judged[depth] += 1
                counts.accepted[depth] += depth < n
            seq += ids[:n] + [nxt]
        made += len(seq) - len(prompt)
        draft.follow(None)
    target.reset()
    draft.reset()
    return counts, made


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


def choose(main_backend, candidates: dict[str, tuple[Any, str, list[float] | None]], seq: list[int],
           left_out: dict[str, tuple[str, str]] | None = None, prompts: list[list[int]] | None = None,
           stop_ids=frozenset(), measured: dict[str, tuple[list[float], str]] | None = None) -> DraftChoice:
    """Measure and choose. ``candidates``: kind -> (draft backend, its description, the acceptance per
    depth when known, else None: measured here on ``prompts`` by `measure_acceptance`); ``left_out``:
    kind -> (description, why); ``measured``: acceptances measured already (another target dtype
    of the same model: the same requests, the same greedy answers), kept in it for the next call."""
    from decoders.analysis.timing import measure_cost_curve
    from decoders.backends.runner import KVRunner

    measured = {} if measured is None else measured
    target = KVRunner(main_backend)
    judged: list[Candidate] = []
    for kind, (backend, source, accept) in candidates.items():
        draft = KVRunner(backend)
        candidate = Candidate(kind, source)
        if accept is not None:
            candidate.accept, candidate.accept_from = accept, "given"
        else:
            if kind not in measured:
                counts, made = measure_acceptance(main_backend, backend, prompts or [seq], stop_ids)
                measured[kind] = (counts.per_depth(), counts.text(len(prompts or [seq]), made))
            candidate.accept, candidate.accept_from = measured[kind]
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
    curve = measure_cost_curve(target, seq, widths=MAX_GAMMA + 1, repeats=CHOICE_REPEATS)
    target.reset()
    for candidate in judged:
        candidate.c = round((candidate.c or 0.0) / step_ms, 3)
        candidate.gamma, predicted = best_chain(candidate.accept, candidate.c, curve)
        candidate.predicted = round(predicted, 3)
    best = max(judged, key=lambda c: c.predicted or 0.0)
    out = [*judged, *(Candidate(kind, source, left_out=why) for kind, (source, why) in (left_out or {}).items())]
    return DraftChoice(chosen=best.kind, step_ms=round(step_ms, 2), curve=curve, candidates=out)


def build_draft(spec, main_backend, main_model, kind: str) -> tuple[Any, str]:
    """The ``kind`` ("int4" or "head") draft of ``spec``'s main model and its description (a kept
    choice builds only this one), by the kind's declared builder; DecodeError says why it cannot be built."""
    from decoders.models.drafts import DraftTarget, TrainedHead, head_of, kind_of, source_of
    from decoders.models.drafts import build_draft as build

    head = head_of(spec.draft) or TrainedHead()
    draft = head if kind == "head" else kind_of(kind).default()
    backend = build(draft, DraftTarget(main_backend, main_model, spec.main, head=head))
    return backend, source_of(draft, backend)


def choose_for_family(spec, main_backend: Backend, main_model, tokenizer, report, stop_ids=frozenset(),
                      measured: dict[str, tuple[list[float], str]] | None = None, at: float = 0.93,
                      ) -> tuple[Any, str, str, DraftChoice]:
    """Build the drafts ``spec``'s main model can have (int4, the trained head), measure, choose:
    ``(draft backend, its description, its kind, the record)``; the others are dropped.
    ``measured``: as `choose` takes it; ``at``: the load's progress while the drafts are timed."""
    from decoders.core.errors import DecodeError
    from decoders.models.backend_choice import head_folder, warm_up

    built: dict[str, tuple[Any, str, list[float] | None]] = {}
    left_out: dict[str, tuple[str, str]] = {}
    try:
        built["int4"] = (*build_draft(spec, main_backend, main_model, "int4"), None)
    except DecodeError as err:
        left_out["int4"] = ("int4 self-draft", str(err).rstrip("."))
    folder = head_folder(spec.head, spec.main, missing_ok=True)
    if folder is not None:
        try:
            head, _ = build_draft(spec, main_backend, main_model, "head")
            built["head"] = (head, f"trained head ({Path(folder).name})", None)
        except DecodeError as err:
            left_out["head"] = (f"trained head ({Path(folder).name})", str(err).rstrip("."))
    if not built:
        why = "; ".join(f"{source}: {reason}" for source, reason in left_out.values()) or "it has no trained head"
        raise DecodeError(f"No draft to choose the fastest of for this model ({why}); draft with --helper SRC or "
                          "--self-draft-layer L.")
    for backend, _, _ in built.values():
        warm_up(backend)
    report("Timing the drafts on this machine and measuring how often each is accepted", at)
    ids = passage_ids(tokenizer)
    most = max(8, main_backend.max_positions - ACCEPT_TOKENS - ACCEPT_GAMMA - 2)
    choice = choose(main_backend, built, ids, left_out, choice_prompt_ids(tokenizer, most), stop_ids, measured)
    backend = built[choice.chosen][0]
    return backend, "int4 self-draft" if choice.chosen == "int4" else backend.source, choice.chosen, choice
