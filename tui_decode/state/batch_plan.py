"""What the batch screen (b, issue 39) runs and shows, apart from the screen: the batch sizes and
methods typed into it (each refused in one line), the B prompts (the prompt shown first, then the
project's own prompt sets, never the bench's Spec-Bench prompts), the rows each method runs as,
each sequence's one-line progress and the saved CSV."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from decoders.core.errors import DecodeError
from decoders.methods.batch.chain import MAX_BATCH

if TYPE_CHECKING:
    from decoders.bench.batch import BatchReport, BatchRow
    from decoders.bench.batch_synthetic import SyntheticBatchRow
    from decoders.bench.settings import SyntheticGrid
    from decoders.core.params import DecodeParams
    from decoders.records.family_info import FamilyInfo
    from tui_decode.state.settings import Settings

#: Batch sizes one screen run takes at most (each runs every method beside autoregressive decoding).
MAX_SIZES = 6
#: Rounds per batch size: the fewest that give a spread (round r takes the next B prompts).
ROUNDS = 2
#: The longest a prompt of the project's sets is cut to (its last tokens), in tokens.
MOST_PROMPT_TOKENS = 256
#: Each method's glyph on the plot (autoregressive decoding is the 1.0x line itself).
GLYPHS = {"pld": "●", "suffix": "▲", "spec": "■"}


def parse_sizes(text: str) -> list[int]:
    """``"1,2,4"`` as ascending distinct batch sizes, each 1..`MAX_BATCH`, at most `MAX_SIZES`
    of them; DecodeError in one line saying what to type."""
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or not all(part.isdigit() for part in parts):
        raise DecodeError(f"batch sizes: give whole numbers 1..{MAX_BATCH} separated by commas, such as 1,2,4; "
                          f"got {text.strip()!r}")
    sizes = sorted({int(part) for part in parts})
    odd = [size for size in sizes if not 1 <= size <= MAX_BATCH]
    if odd:
        raise DecodeError(f"batch sizes: each must be 1..{MAX_BATCH}, got {odd[0]}; give e.g. 1,2,4,8")
    if len(sizes) > MAX_SIZES:
        raise DecodeError(f"batch sizes: at most {MAX_SIZES} at a time (each runs every method twice), got "
                          f"{len(sizes)}")
    return sizes


def family_methods(settings: Settings, backend: str, has_helper: bool) -> dict[str, str | None]:
    """The methods the loaded family can run at batch > 1 besides autoregressive decoding, with
    the draft the settings choose: each name with None where it can, else the line saying why not
    (what is left, a model the batched path cannot take, the run itself says)."""
    from decoders.methods.batch.model_draft import BATCHED_DRAFTS, LLAMACPP_BATCHED_DRAFTS

    kind = settings.self_draft or ("early-exit" if settings.draft is not None else "helper" if has_helper else None)
    why: str | None = None
    if backend != "torch":
        if kind not in LLAMACPP_BATCHED_DRAFTS:
            why = ("spec drafts at batch > 1 on llama.cpp with a GGUF helper only; pick a family with a GGUF helper "
                   "(f) or leave spec out")
    elif kind not in BATCHED_DRAFTS:
        why = ("spec drafts at batch > 1 with a helper model, the int4 self-draft or a trained head only; choose the "
               "int4 or head draft in the parameters pane, or a family with a helper (f)")
    return {"pld": None, "suffix": None, "spec": why}


def parse_methods(text: str, offered: dict[str, str | None], grid: bool = False) -> list[str]:
    """``"pld,spec"`` as the rows to run beside autoregressive decoding; DecodeError in one line
    for a method that does not decode at batch > 1 or that this family cannot run so. With a
    synthetic ``grid`` the field may name none (autoregressive decoding and the grid alone)."""
    names = [name.strip() for name in text.split(",") if name.strip() and name.strip() != "ar"]
    if not names and grid:
        return []
    if not names:
        raise DecodeError(f"methods: give one or more of {', '.join(offered)} (autoregressive decoding runs beside "
                          "each anyway)")
    for name in names:
        if name not in offered:
            raise DecodeError(f"methods: {name!r} does not decode at batch > 1 here; give {', '.join(offered)}")
        if offered[name] is not None:
            raise DecodeError(f"methods: {name} cannot run at batch > 1 on this family: {offered[name]}")
    return list(dict.fromkeys(names))


#: The synthetic grid field's placeholder, and the example its refusals end with.
GRID_HINT = "synthetic grid: α,α:γ..γ[:c] e.g. 0.5,0.7,0.9:1..8 (empty: none)"
GRID_EXAMPLE = "give e.g. 0.5,0.7,0.9:1..8 (acceptance values : draft lengths [: draft cost c]) or leave it empty"


def parse_synthetic(text: str) -> SyntheticGrid | None:
    """The synthetic grid field (`decoders.bench.batch_synthetic.parse_grid`, its bounds): acceptance
    values, then draft lengths, then optionally the draft's cost c in one-token steps (default 0);
    None where it is empty; DecodeError in one line naming the field."""
    from decoders.bench.batch_synthetic import MAX_COST, parse_grid

    text = text.strip()
    if not text:
        return None
    rates, _, rest = text.partition(":")
    lengths, colon, cost_text = rest.partition(":")
    try:
        cost = float(cost_text) if colon else 0.0
    except ValueError:
        cost = -1.0
    if not 0.0 <= cost <= MAX_COST:
        raise DecodeError(f"synthetic grid: the draft cost after the second colon must be 0..{MAX_COST:g} one-token "
                          f"steps, got {cost_text.strip()!r}; {GRID_EXAMPLE}")
    return parse_grid(f"{rates}:{lengths}", cost, flag="synthetic grid", example=GRID_EXAMPLE)


def start_methods(method: str, offered: dict[str, str | None]) -> str:
    """What the methods field starts with: the chosen method where it runs at batch > 1, else pld."""
    return method if offered.get(method, "no") is None else "pld"


@dataclass(frozen=True)
class BatchVariant:
    """A row as `decoders.bench.batch.row_specs` takes a ``--variants`` item: ``method`` at the
    app's draft length and policy for it, labelled by its name alone."""

    method: str
    overrides: tuple[tuple[str, Any], ...]
    draft: str | None = None

    @property
    def label(self) -> str:
        return self.method


def variants(methods: Sequence[str], params: DecodeParams) -> list[BatchVariant]:
    """Each method's row at the draft length the parameters pane gives it (prompt lookup's k,
    suffix decoding's k max, speculative decoding's γ) and the pane's draft policy."""
    lengths = {"pld": params.num_pred, "suffix": params.suffix_max, "spec": params.gamma}
    return [BatchVariant(m, ((length_param(m), int(lengths[m])), ("draft_policy", str(params.draft_policy))))
            for m in methods]


def length_param(method: str) -> str:
    """The parameter a batch row's draft length is set by (`decoders.bench.batch.row_specs`)."""
    return "suffix_max" if method == "suffix" else "num_pred"


def suffix_shape(family, params: DecodeParams, prompts: Sequence[Sequence[int]]):
    """The suffix rows' depth, factor and minimum probability from the parameters pane, and, where
    the pane drafts from both trees, the session's memory of earlier responses (only read; its
    responses to these prompts left out: `decoders.methods.batch.suffix.memory_tree`)."""
    from decoders.methods.batch.suffix import SuffixShape, memory_tree
    from decoders.methods.shared.suffix_memory import memory_for

    depth = int(params.suffix_depth)
    memory = memory_for(family) if params.suffix_source == "both" else None
    tree = memory_tree(memory, prompts, depth) if memory is not None and len(memory) else None
    return SuffixShape(depth, float(params.suffix_factor), float(params.suffix_min_prob), tree)


def project_prompts(count: int) -> list[str]:
    """``count`` requests from the project's own prompt sets (`decoders.training.prompts`): the
    draft choice's three first, then the other sets from their ends, each once."""
    from decoders.models.draft_choice import choice_prompts
    from decoders.training.prompts import more_prompts, training_prompts

    out = list(dict.fromkeys(choice_prompts()))
    for a, b in zip(reversed(more_prompts()), reversed(training_prompts()), strict=False):
        if len(out) >= count:
            break
        out += [p for p in (a, b) if p not in out]
    return out[:count]


def prompt_ids(family, current: str, chat_template: bool, count: int, room: int) -> list[list[int]]:
    """The current prompt's ids first, then ``count - 1`` of the project's, each cut to its last
    ``room`` tokens (at most `MOST_PROMPT_TOKENS`); DecodeError where the current one has no room."""
    first = family.encode_prompt(current, chat_template)
    if len(first) > room:
        raise DecodeError(f"the prompt ({len(first)} tokens) leaves no room for the tokens asked in the model's "
                          f"context of {family.context_length}; shorten it or lower max new tokens")
    most = min(room, MOST_PROMPT_TOKENS)
    return [first] + [family.encode_prompt(text, chat_template)[-most:] for text in project_prompts(count - 1)]


def progress_line(index: int, tokens: int, max_new: int, finish: str | None, selected: bool) -> str:
    """One sequence's line: its number, a bar, its tokens so far and whether it is done."""
    width = 12
    filled = round(width * min(tokens, max_new) / max(max_new, 1))
    state = "" if finish is None else f" · done ({finish})"
    return f"{'▸' if selected else ' '} seq {index + 1:>2} {'█' * filled}{'░' * (width - filled)} " \
           f"{tokens:>4}/{max_new} tokens{state}"


def save_batch(folder, markdown: str, rows: Sequence[BatchRow], synthetic: Sequence[SyntheticBatchRow]) -> list[str]:
    """The report as Markdown, its rows as CSV and the synthetic cells (if any) as a CSV of their
    own in ``folder``, never over an earlier save; the names written."""
    import time

    from decoders.records import atomic
    from tui_decode.state.runs_folder import write_new

    folder.mkdir(parents=True, exist_ok=True)
    md = write_new(folder, f"{time.strftime('%Y%m%d-%H%M%S')}-batch", ".md",  # never over one
                   lambda p: atomic.write_text(p, markdown, "the batch table", exclusive=True))
    atomic.write_text(folder / f"{md.stem}.csv", rows_csv(rows), "the batch table")
    names = [md.name, f"{md.stem}.csv"]
    if synthetic:
        atomic.write_text(folder / f"{md.stem}-synthetic.csv", synthetic_csv(synthetic), "the synthetic cells")
        names.append(f"{md.stem}-synthetic.csv")
    return names


def rows_csv(rows: Sequence[BatchRow]) -> str:
    lines = ["method,batch,speedup,spread,throughput,ar_throughput,latency_s,accepted_per_forward,identical"]
    for r in rows:
        lines.append(f"{r.method},{r.batch},{r.speedup},{'' if r.spread is None else r.spread},{r.throughput},"
                     f"{r.ar_throughput},{r.latency_s},{r.accepted_per_forward},{'yes' if r.identical else 'no'}")
    return "\n".join(lines) + "\n"


def synthetic_csv(rows: Sequence[SyntheticBatchRow]) -> str:
    """The synthetic cells, apart from the real rows: measured against both predictions."""
    lines = ["label,batch,alpha,gamma,cost,decode_speedup,spread,predicted,ratio,predicted_finite,ratio_finite,"
             "alpha_hat,identical"]
    for r in rows:
        lines.append(",".join("" if v is None else str(v) for v in (
            r.label, r.batch, r.alpha, r.gamma, r.cost, r.decode_speedup, r.spread, r.predicted, r.ratio,
            r.predicted_finite, r.ratio_finite, r.alpha_hat)) + f",{'yes' if r.identical else 'no'}")
    return "\n".join(lines) + "\n"


def report_markdown(report: BatchReport | None, rows: Sequence[BatchRow], family: FamilyInfo, max_new: int,
                    prompt: str, synthetic: Sequence[SyntheticBatchRow] = ()) -> str:
    """The saved Markdown: the bench's report of the run (`decoders.bench.batch_report`), or of
    the rows (and ``synthetic`` cells) measured before a cancel; the prompt shown named."""
    from decoders.bench.batch import BatchReport, crossover
    from decoders.bench.batch_report import render_markdown
    from decoders.bench.machine import BatchMachine
    from decoders.bench.settings import BatchSettings

    if report is None:
        methods = dict.fromkeys(r.method for r in rows if r.method != "ar")
        batches = sorted({r.batch for r in rows})
        settings = BatchSettings(batches=batches, methods=["ar", *methods], max_new_tokens=max_new, rounds=ROUNDS,
                                 k=max((r.k for r in rows), default=0), prompts=0)
        report = BatchReport(family=family, machine=BatchMachine(), settings=settings,
                             surface={}, surface_unit_ms=0.0, rows=list(rows), synthetic=list(synthetic),
                             crossover={m: crossover([r for r in rows if r.method == m]) for m in methods},
                             notes=["cancelled: the rows measured before escape"])
    return render_markdown(report) + f"\nprompt shown (sequence 1 of each first round): {prompt[:200]!r}\n"
