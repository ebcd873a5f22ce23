"""``dtype = "fastest"``: on CPU, float32 or float16 weights, whichever decodes faster here.

A float16-weight forward (`decoders.backends.fp16_cpu`) reads half the bytes of a float32 one and
its verify-cost curve is flatter, but fbgemm's kernels are not equally fast on every CPU, and the
draft that pays differs with the target's speed (a faster target raises every draft's relative
cost). So with the draft chosen too (``self_draft = "fastest"``) the choice is joint: for each
target, the drafts are measured as `decoders.models.draft_choice` measures them, and the winner
is the target whose best draft gives the fewest predicted milliseconds per token (its one-token
step over its best draft's predicted speedup). Without a draft to choose, the faster one-token
step wins. The float32 model is loaded either way (the int4 self-draft is quantized from it and
the bench's reference runs it); the loser's backend and drafts are dropped.

Off the CPU "fastest" is "auto"; where float16 weights cannot run (no fbgemm, the transformers
backend, a device map, a model the fast backend cannot take) it is float32, and the record says why.
"""

from __future__ import annotations

import gc
from dataclasses import asdict, dataclass, field
from typing import Any

from decoders.models.draft_choice import DraftChoice, one_token_ms, passage_ids

FLOAT16 = "float16 weights"
FLOAT32 = "float32"


@dataclass
class TargetOption:
    dtype: str  # "float32" or "float16"
    step_ms: float
    draft: str | None = None  # the best draft's description, when drafts were chosen
    predicted: float | None = None  # its predicted speedup
    ms_per_token: float | None = None


@dataclass
class DtypeChoice:
    chosen: str
    options: list[TargetOption] = field(default_factory=list)
    left_out: str | None = None  # why float16 weights were not measured

    def as_dict(self) -> dict:
        return asdict(self)

    def record(self) -> dict:
        """What `Family.dtype_choice` keeps: the figures and the sentence."""
        return self.as_dict() | {"sentence": self.sentence()}

    def sentence(self) -> str:
        if self.left_out:
            return f"float32 (float16 weights cannot run here: {self.left_out})"
        parts = []
        for o in sorted(self.options, key=lambda o: o.dtype != self.chosen):
            name = FLOAT16 if o.dtype == "float16" else FLOAT32
            if o.ms_per_token is not None and o.predicted is not None:
                parts.append(f"{name}: {o.step_ms:.1f} ms steps, {o.draft} {o.predicted:.2f}x, "
                             f"{o.ms_per_token:.1f} ms per token predicted")
            else:
                parts.append(f"{name}: {o.step_ms:.1f} ms steps")
        return f"{FLOAT16 if self.chosen == 'float16' else FLOAT32}, the faster here ({'; '.join(parts)})"


def float16_reason(model, fast: bool, device_map) -> str | None:
    """Why float16 weights cannot run this CPU family, or None."""
    from decoders.backends.fp16_cpu import fbgemm_reason
    from decoders.backends.llama_fast import unsupported_reason

    if not fast:
        return "the transformers backend was asked for"
    if device_map is not None:
        return "a device map spreads the model"
    return fbgemm_reason() or unsupported_reason(model)


def step_ms(backend, seq: list[int]) -> float:
    """Median one-token step after ``seq`` (`draft_choice.one_token_ms`, the draft choice's measure)."""
    from decoders.backends.runner import KVRunner

    runner = KVRunner(backend)
    runner.run(seq)
    ms = one_token_ms(runner, seq, seq[-1])
    runner.reset()
    return ms


def choose_target(mains: dict[str, Any], tokenizer, draft_for=None, report=None
                  ) -> tuple[str, Any, tuple | None, DtypeChoice]:
    """Of ``mains`` (dtype name -> warmed-up main backend), the fastest here. ``draft_for(main)``,
    when given, chooses that main's draft: ``(draft backend, description, kind, DraftChoice)``.
    Returns ``(dtype, main backend, its draft choice or None, the record)``; the others are dropped."""
    seq = passage_ids(tokenizer)
    options, drafts = [], {}
    for i, (dtype, main) in enumerate(mains.items()):
        if report is not None:  # the load's progress rises through the targets (0.86-0.96), never back
            report(f"Timing the {FLOAT16 if dtype == 'float16' else FLOAT32} target on this machine",
                   0.86 + 0.1 * i / len(mains))
        if draft_for is not None:
            drafts[dtype] = draft_for(main)
            choice: DraftChoice = drafts[dtype][3]
            best = next(c for c in choice.candidates if c.kind == choice.chosen)
            predicted = best.predicted or 0.0
            options.append(TargetOption(dtype, choice.step_ms, drafts[dtype][1], predicted,
                                        round(choice.step_ms / predicted, 2) if predicted > 0 else None))
        else:
            options.append(TargetOption(dtype, round(step_ms(main, seq), 2)))
    fastest = min(options, key=lambda o: o.ms_per_token if o.ms_per_token is not None else o.step_ms)
    for dtype in mains:
        if dtype != fastest.dtype:  # the loser's packed weights and drafts go now
            drafts.pop(dtype, None)
    chosen_main = mains[fastest.dtype]
    mains.clear()
    gc.collect()
    return fastest.dtype, chosen_main, drafts.get(fastest.dtype), DtypeChoice(fastest.dtype, options)
