"""Synthetic acceptance at batch B (`tui-decode bench --batch 1,4 --synthetic-grid 0.5,0.7,0.9:1..8`):
a measuring instrument beside the batch bench's real rows, never among them.

Each sequence of the batch drafts its own target's greedy continuation (its batch-1 autoregressive
output, which the bench decodes anyway to check identity) with acceptance α at every position and
a wrong token from the first wrong draw on, by the batch-1 synthetic draft's own rule
(`decoders.methods.synthetic.draft_chain`: the same seeded draws; row r of round t of cell i (the
grid's cells in order) draws from seed + (i * rounds + t) * B + r, so no two cells share draws and
row 0 of the first round of the first cell draws as a batch-1 synthetic run with that seed). The
batch drafts together, as the spec row's batched draft model does: an iteration costs c one-token
steps of the batch (T(B, 1) of the measured surface) per position of the longest chain, a
busy-wait (`busy_wait`, as at batch 1). The target verifies every row's chain in one forward
(`decoders.methods.batch.chain.decode_batch`), so each sequence's output is its batch-1 output.

Each cell (α, γ) runs, in every round, right after an autoregressive run of the same prompts at
the same batch size; its measured speedup (the decode after the prefill, as at batch 1) sits beside
Theorem 3.8 with the verify cost measured at that batch size: E[tokens] / (γ c + T(B, γ+1) /
T(B, 1)) (`chain_speedup`), and the prediction of what the run does (`decoders.analysis.finite`:
the budget cutting the last chain, the batch waiting for its slowest row, its last forwards with
fewer rows at T(B', k) of the surface); the realised acceptance of a short run is what neither
knows (hence the predictions at alpha_hat beside them).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from functools import partial
from statistics import mean, stdev
from typing import TYPE_CHECKING

from decoders.analysis.finite import Cost, finite_speedup, surface_cost
from decoders.analysis.theory import chain_speedup, expected_tokens
from decoders.bench.batch_identity import Divergence, compare_runs
from decoders.bench.batch_surface import WIDTHS
from decoders.bench.settings import SyntheticGrid
from decoders.core.errors import DecodeError
from decoders.methods.synthetic import busy_wait, draft_chain
from decoders.records.codec import Record

if TYPE_CHECKING:
    from decoders.backends.capabilities import BatchedModel
    from decoders.methods.batch.chain import BatchRun

#: Bounds of a grid: acceptance values, the longest draft (T(B, γ+1) must lie on the surface's
#: k = 1..16), and cells (each runs twice per round at every batch size).
MAX_ALPHAS = 8
MAX_GAMMA = WIDTHS - 1
MAX_CELLS = 64
DEFAULT_GAMMAS = (1, 2, 3, 4, 5, 6, 7, 8)
#: The draft's cost bounds, as `tui-decode run --synthetic-cost`'s.
MAX_COST = 4.0
EXAMPLE = "give e.g. --synthetic-grid 0.5,0.7,0.9:1..8"


def _gammas(text: str, flag: str, example: str) -> list[int]:
    low, dots, high = text.partition("..")
    parts = [low, high] if dots else text.split(",")
    if not all(p.strip().isdigit() for p in parts):
        raise DecodeError(f"{flag} takes its draft lengths as G..G or G,G after the colon, got {text!r}; "
                          f"{example}")
    values = list(range(int(low), int(high) + 1)) if dots else [int(p) for p in parts]
    odd = [g for g in values if not 1 <= g <= MAX_GAMMA]
    if odd or not values:
        raise DecodeError(f"{flag}'s draft lengths must be 1..{MAX_GAMMA} (T(B, γ+1) is measured up to "
                          f"k={WIDTHS}), got {text!r}; {example}")
    return sorted(set(values))


def parse_grid(text: str, cost: float | None = None, flag: str = "--synthetic-grid",
               example: str = EXAMPLE) -> SyntheticGrid:
    """``"0.5,0.7,0.9:1..8"`` (acceptance values, then draft lengths; without them γ 1..8) as a
    grid; DecodeError in one line for a value out of range or a grid above its bounds (``flag``
    and ``example``: how the line names the field and what it offers, the app's wording or the
    command line's)."""
    rates, _, lengths = text.partition(":")
    try:
        alphas = [float(part) for part in rates.split(",")]
    except ValueError:
        raise DecodeError(f"{flag} takes acceptance values such as 0.5,0.7,0.9, got {rates!r}; "
                          f"{example}") from None
    odd = [a for a in alphas if not 0.0 <= a <= 1.0]
    if odd:
        raise DecodeError(f"synthetic acceptance must be in 0..1, got {odd[0]:g}; {example}")
    alphas = sorted(set(alphas))
    if len(alphas) > MAX_ALPHAS:
        raise DecodeError(f"{flag} takes at most {MAX_ALPHAS} acceptance values, got {len(alphas)}; "
                          "give fewer")
    gammas = _gammas(lengths, flag, example) if lengths.strip() else list(DEFAULT_GAMMAS)
    if len(alphas) * len(gammas) > MAX_CELLS:
        raise DecodeError(f"{flag} asks for {len(alphas)} x {len(gammas)} = {len(alphas) * len(gammas)} "
                          f"cells, more than {MAX_CELLS}; give fewer acceptance values or draft lengths")
    cost = 0.0 if cost is None else float(cost)
    if not 0.0 <= cost <= MAX_COST:
        raise DecodeError(f"--synthetic-cost must be in 0..{MAX_COST:g} one-token steps, got {cost:g}; "
                          "give e.g. --synthetic-cost 0.05")
    return SyntheticGrid(alphas=alphas, gammas=gammas, cost=cost)


class SyntheticBatchDraft:
    """Every row's synthetic chain, drafted together (the `decode_batch` draft interface of
    `decoders.methods.batch.model_draft.ModelDraft`); tallies the positions the target judged and
    accepted (a row's positions up to its first rejection)."""

    def __init__(self, references: Sequence[Sequence[int]], alpha: float, gamma: int, cost: float, step_s: float,
                 vocab: int, seeds: Sequence[int], clock: Callable[[], float] = time.perf_counter,
                 wait: Callable[[float], None] | None = None):
        self.refs = [list(r) for r in references]
        self.rates = [alpha] * gamma
        self.gamma, self.cost, self.step_s, self.vocab, self.clock = gamma, cost, step_s, vocab, clock
        self.wait = wait or busy_wait
        self.rngs = [random.Random(seed) for seed in seeds]
        self.rows: list[int] = []
        self.prompt_lengths: list[int] = []
        self._lengths: list[int] = []
        self.judged = self.accepted = self.charged = self.parted = 0
        self.waited_s = 0.0

    def start(self, prompts: Sequence[Sequence[int]]) -> None:
        self.rows = list(range(len(prompts)))
        self.prompt_lengths = [len(p) for p in prompts]

    def keep_rows(self, rows: Sequence[int]) -> None:
        self.rows = [self.rows[r] for r in rows]

    def propose(self, seqs: Sequence[list[int]], budgets: Sequence[int]) -> list[list[int]]:
        drafts: list[list[int]] = []
        for row, seq, budget in zip(self.rows, seqs, budgets, strict=True):
            out, ref = seq[self.prompt_lengths[row]:], self.refs[row]
            if out != ref[: len(out)]:  # parted from batch 1 at a near tie: no right token known
                self.parted += 1
                drafts.append([])
                continue
            drafts.append(draft_chain(ref, len(out), min(self.gamma, budget), self.rates, self.rngs[row], self.vocab))
        self._lengths = [len(d) for d in drafts]
        width = max(self._lengths, default=0)
        t0 = self.clock()
        self.wait(width * self.cost * self.step_s)
        self.waited_s += self.clock() - t0
        self.charged += width
        return drafts

    def settle(self, accepted: Sequence[int]) -> None:
        for n, drafted in zip(accepted, self._lengths, strict=True):
            self.accepted += n
            self.judged += n + (1 if n < drafted else 0)

    def tidy(self, compact_at: float) -> None:
        pass


class SyntheticBatchRow(Record, kw_only=True):
    """One synthetic cell (α, γ, c) at one batch size over the rounds: measured against the
    cost-aware Theorem 3.8 at T(B, k) measured at that batch size."""

    label: str
    batch: int
    alpha: float
    gamma: int
    cost: float
    throughput: float  # tokens per second over all sequences (mean over rounds)
    ar_throughput: float  # its paired autoregressive runs
    speedup: float  # whole runs, prefill included (as the bench's real rows)
    decode_speedup: float  # after the prefill: what the theorem predicts
    spread: float | None  # two standard errors of the decode speedup over the rounds
    verify_cost: float | None  # T(B, γ+1) / T(B, 1): the verify forward in one-token steps of the batch
    predicted: float | None  # Theorem 3.8 at α, γ, c and that verify cost
    ratio: float | None  # decode_speedup / predicted
    alpha_hat: float  # accepted / judged positions, every round
    judged: int
    predicted_at_alpha_hat: float | None
    c_hat: float  # the draft's measured cost per position, in one-token steps of the batch
    identical: bool  # every sequence equal to its batch-1 output
    synthetic: bool = True
    expected_tokens: float = 0.0  # the theorem's tokens per iteration at α, γ
    row_tokens: float = 0.0  # what the rows met: a row's tokens after the prefill over its iterations (mean)
    stretch: float = 0.0  # the batch's verify forwards over a row's iterations (mean): the slowest row's tail
    # what the run does at α (`decoders.analysis.finite`): max_new - 1 tokens per row after the
    # prefill, the batch until its slowest row is done; None in reports from before it
    predicted_finite: float | None = None
    ratio_finite: float | None = None  # decode_speedup / predicted_finite
    predicted_finite_at_alpha_hat: float | None = None


def decode_rate(run: BatchRun) -> float:
    """Tokens per second after the prefill (each row's first token is the prefill's)."""
    seconds = run.wall_s - run.prefill_s
    return (run.tokens - run.batch) / seconds if seconds > 0 else 0.0


def measure_synthetic(lm: Callable[[int], BatchedModel], prompts: Sequence[list[int]], size: int, grid: SyntheticGrid,
                      rounds: int, max_new: int, ref: Callable[[int], list[int]], surface: dict[int, list[float]],
                      unit_ms: float, vocab: int, stop_ids: frozenset[int],
                      clock: Callable[[], float] = time.perf_counter, say: Callable[[str], None] = lambda line: None,
                      wait: Callable[[float], None] | None = None,
                      on_cell: Callable[[SyntheticBatchRow], None] | None = None,
                      on_step: Callable[[str, int, list], None] | None = None,
                      ) -> tuple[list[SyntheticBatchRow], list[Divergence]]:
    """Every cell of ``grid`` at batch ``size``, ``rounds`` rounds (round t: the prompts from offset
    t * size), each synthetic run right after an autoregressive run of the same prompts;
    ``on_cell``: each cell once measured; ``on_step``: as `decoders.bench.batch.run_batch_bench`'s,
    under the cell's label (the autoregressive runs beside it as "ar beside" it)."""
    from decoders.methods.batch.chain import decode_batch

    curve = surface[size]
    step_s = unit_ms / 1000 * curve[0]
    rows: list[SyntheticBatchRow] = []
    divergences: list[Divergence] = []
    cost = surface_cost(surface)
    for cell, (alpha, gamma) in enumerate(grid.cells()):
        label = f"synthetic α={alpha:g} γ={gamma}"
        pairs: list[tuple[BatchRun, BatchRun]] = []
        drafts: list[SyntheticBatchDraft] = []
        sets = []
        for round_ in range(rounds):
            chosen = [(round_ * size + i) % len(prompts) for i in range(size)]
            sets.append(chosen)
            batch_prompts = [prompts[i] for i in chosen]
            draft = SyntheticBatchDraft([ref(i) for i in chosen], alpha, gamma, grid.cost, step_s, vocab,
                                        cell_seeds(grid.seed, cell, round_, rounds, size), clock, wait)
            ar = decode_batch(lm(size), batch_prompts, max_new, "ar", stop_ids=stop_ids, clock=clock,
                              on_step=None if on_step is None else partial(on_step, f"ar beside {label}", size))
            run = decode_batch(lm(size), batch_prompts, max_new, "synthetic", gamma=gamma, stop_ids=stop_ids,
                               clock=clock, draft=draft,
                               on_step=None if on_step is None else partial(on_step, label, size))
            pairs.append((ar, run))
            drafts.append(draft)
        parted = compare_runs(label, size, sets, [run for _, run in pairs], ref, lm, prompts)
        divergences += parted
        rows.append(_row(label, size, alpha, gamma, grid.cost, curve, pairs, drafts, step_s, not parted))
        rows[-1] = _finite(rows[-1], max_new - 1, cost)
        say(f"batch {size}: {label} {format_ratio(rows[-1])}")
        if on_cell is not None:
            on_cell(rows[-1])
    return rows, divergences


def cell_seeds(seed: int, cell: int, round_: int, rounds: int, size: int) -> list[int]:
    """The seeds of the ``size`` rows of round ``round_`` of the grid's cell ``cell``: none shared
    with another row, round or cell."""
    return [seed + (cell * rounds + round_) * size + i for i in range(size)]


def _finite(row: SyntheticBatchRow, tokens: int, cost: Cost) -> SyntheticBatchRow:
    """``row`` with the finite-budget predictions at α and alpha_hat (``tokens`` per row after the
    prefill; T(B', k) of the measured surface)."""
    at = finite_speedup(tokens, row.alpha, row.gamma, row.cost, row.batch, cost)
    hat = finite_speedup(tokens, row.alpha_hat, row.gamma, row.cost, row.batch, cost)
    row.predicted_finite, row.predicted_finite_at_alpha_hat = round(at, 3), round(hat, 3)
    row.ratio_finite = round(row.decode_speedup / at, 3) if at else None
    return row


def _row(label: str, size: int, alpha: float, gamma: int, cost: float, curve: list[float],
         pairs: list[tuple[BatchRun, BatchRun]], drafts: list[SyntheticBatchDraft], step_s: float,
         identical: bool) -> SyntheticBatchRow:
    whole = [run.throughput / ar.throughput for ar, run in pairs if ar.throughput]
    decode = [decode_rate(run) / decode_rate(ar) for ar, run in pairs if decode_rate(ar)]
    judged, accepted = sum(d.judged for d in drafts), sum(d.accepted for d in drafts)
    charged = sum(d.charged for d in drafts)
    alpha_hat = accepted / judged if judged else 0.0
    verify = curve[gamma] / curve[0] if len(curve) > gamma and curve[0] else None
    predicted = chain_speedup([alpha], gamma, cost, verify) if verify is not None else None
    measured = mean(decode) if decode else 0.0
    rows = [row for _, run in pairs for row in run.rows if row.iterations > 1]
    iterations = mean(row.iterations - 1 for row in rows) if rows else 0.0
    return SyntheticBatchRow(
        label=label, batch=size, alpha=alpha, gamma=gamma, cost=cost,
        throughput=round(mean(run.throughput for _, run in pairs), 3),
        ar_throughput=round(mean(ar.throughput for ar, _ in pairs), 3),
        speedup=round(mean(whole), 3) if whole else 0.0, decode_speedup=round(measured, 3),
        spread=round(2 * stdev(decode) / len(decode) ** 0.5, 3) if len(decode) > 1 else None,
        verify_cost=round(verify, 3) if verify is not None else None,
        predicted=round(predicted, 3) if predicted is not None else None,
        ratio=round(measured / predicted, 3) if predicted else None,
        alpha_hat=round(alpha_hat, 4), judged=judged,
        predicted_at_alpha_hat=None if verify is None else round(chain_speedup([alpha_hat], gamma, cost, verify), 3),
        c_hat=round(sum(d.waited_s for d in drafts) / charged / step_s, 3) if charged and step_s else 0.0,
        identical=identical, expected_tokens=round(expected_tokens(alpha, gamma), 3),
        row_tokens=round(mean((len(row.out) - 1) / (row.iterations - 1) for row in rows), 3) if rows else 0.0,
        stretch=round(mean(run.forwards - 1 for _, run in pairs) / iterations, 3) if iterations else 0.0)


def format_ratio(row: SyntheticBatchRow) -> str:
    predicted = "–" if row.predicted is None else f"{row.predicted:.2f}x"
    ratio = "–" if row.ratio is None else f"{row.ratio:.3f}"
    finite = "–" if row.predicted_finite is None else f"{row.predicted_finite:.2f}x"
    against = "–" if row.ratio_finite is None else f"{row.ratio_finite:.3f}"
    return (f"decode speedup {row.decode_speedup:.2f}x, predicted {predicted}, measured / predicted {ratio}, "
            f"predicted (finite) {finite}, measured / finite prediction {against}")


HEADER = ("| row | batch | α | γ | c | speedup (whole run) | decode speedup | ± | T(B,γ+1)/T(B,1) | predicted | "
          "measured / predicted | predicted (finite) | measured / finite prediction | alpha_hat | predicted at "
          "alpha_hat | measured / that | finite at alpha_hat | measured / finite at alpha_hat | E[tokens] | tokens / "
          "iteration (rows) | forwards / row iterations | c_hat | identical |")


def _x(value: float | None, digits: int = 3, suffix: str = "x") -> str:
    return "–" if value is None else f"{value:.{digits}f}{suffix}"


def synthetic_section(rows: Sequence[SyntheticBatchRow]) -> list[str]:
    """The synthetic rows' own section of the batch report: a table, and how many cells came
    within 10% of the prediction at each batch size."""
    lines = ["## Synthetic acceptance (a measuring instrument, not a method) against Theorem 3.8 at each batch size",
             "", "Each cell beside autoregressive decoding of the same prompts at the same batch size, run just before "
             "it; decode speedup after the prefill; predicted: E[tokens] / (γ c + T(B, γ+1) / T(B, 1)) with T(B, k) "
             "measured at that batch size. E[tokens] is the theorem's tokens per iteration; the rows' own (after the "
             "prefill, over their iterations) fall short of it where the budget cuts the last chain; forwards / row "
             "iterations is how far the batch's slowest row stretches it past the mean row. Predicted (finite): "
             "what the run does (decoders.analysis.finite): each row's budget after the prefill, the batch's verify "
             "forwards until its slowest row is done, each at T(B', w + 1) of the rows still active and the widest "
             "draft, plus c w; the theorem's column is its limit for a long budget at batch 1.", "", HEADER,
             "|" + "---|" * (HEADER.count(" | ") + 1)]
    for r in rows:
        that = r.decode_speedup / r.predicted_at_alpha_hat if r.predicted_at_alpha_hat else None
        finite_hat = (r.decode_speedup / r.predicted_finite_at_alpha_hat if r.predicted_finite_at_alpha_hat
                      else None)
        lines.append(f"| {r.label} | {r.batch} | {r.alpha:g} | {r.gamma} | {r.cost:g} | {r.speedup:.3f}x | "
                     f"{r.decode_speedup:.3f}x | {_x(r.spread, 3, '')} | {_x(r.verify_cost, 2, '')} | "
                     f"{_x(r.predicted)} | {_x(r.ratio, 3, '')} | {_x(r.predicted_finite)} | "
                     f"{_x(r.ratio_finite, 3, '')} | "
                     f"{r.alpha_hat:.3f} | {_x(r.predicted_at_alpha_hat)} | {_x(that, 3, '')} | "
                     f"{_x(r.predicted_finite_at_alpha_hat)} | {_x(finite_hat, 3, '')} | {r.expected_tokens:.2f} | "
                     f"{r.row_tokens:.2f} | {r.stretch:.2f} | "
                     f"{r.c_hat:.3f} | {'yes' if r.identical else 'no'} |")
    lines.append("")
    for size in sorted({r.batch for r in rows}):
        at = [r for r in rows if r.batch == size]
        within = [r for r in at if r.ratio is not None and abs(r.ratio - 1) <= 0.10]
        worst = max((abs(r.ratio - 1) for r in at if r.ratio is not None), default=0.0)
        finite = [r.ratio_finite for r in at if r.ratio_finite is not None]
        close = [x for x in finite if abs(x - 1) <= 0.10]
        far = max((abs(x - 1) for x in finite), default=0.0)
        lines.append(f"- synthetic at batch {size}: measured / finite prediction within 10% in {len(close)} of "
                     f"{len(at)} cells (furthest {100 * far:.1f}% off); measured / Theorem 3.8 within 10% in "
                     f"{len(within)} of {len(at)} (furthest {100 * worst:.1f}% off)")
    return lines
