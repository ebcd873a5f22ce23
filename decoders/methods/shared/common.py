"""What every method shares: the decode context, the budget, stop handling, the run record and
the iteration's one host transfer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generator, Sequence, overload

from decoders.records.kinds import (
    KIND_ACCEPTED,
    KIND_AR,
    KIND_BONUS,
    KIND_FIXED,
    STATUS_ACCEPTED,
    STATUS_REJECTED,
    STATUS_UNVERIFIED,
    EmitKind,
    Status,
)
from decoders.records.run import DraftRow, Emitted, Iteration, Run, TopEntry

if TYPE_CHECKING:
    import torch

    from decoders.backends.runner import KVRunner
    from decoders.core.params import DecodeParams
    from decoders.models.family import Family

# A method is a generator: it yields each iteration the moment it is verified and returns the Run.
MethodGen = Generator[Iteration, None, Run]

ROUND = 5


@dataclass
class DecodeContext:
    """Everything a method needs: the family, the prompt, the parameters and the runners."""

    family: Family
    prompt_ids: list[int]
    params: DecodeParams
    main: KVRunner
    helper: KVRunner | None
    clock: Callable[[], float]
    cancelled: Callable[[], bool] = lambda: False
    cost_curve: list[float] | None = None  # T(k) measured earlier at this context, when known


def status_of(i: int, n_accepted: int) -> Status:
    if i < n_accepted:
        return STATUS_ACCEPTED
    return STATUS_REJECTED if i == n_accepted else STATUS_UNVERIFIED


@overload
def r(x: float) -> float: ...
@overload
def r(x: float | None) -> float | None: ...
def r(x: float | None) -> float | None:
    return None if x is None else round(float(x), ROUND)


class RunBuilder:
    """Accumulates emitted tokens and iterations; enforces the token budget and stop tokens.

    Time spent by the consumer between yields (a UI drawing, say) is excluded from the wall
    time: ``yielding`` brackets each yield.
    """

    def __init__(self, ctx: DecodeContext, method: str, label: str | None = None):
        self.ctx = ctx
        self.method = method
        self.label = label or ctx.params.method_def.run_label(ctx.params)
        self.seq: list[int] = list(ctx.prompt_ids)  # prompt + everything emitted
        self.out: list[int] = []
        self.kinds: list[EmitKind] = []
        self.tok_iter: list[int] = []
        self.iters: list[Iteration] = []
        self.finish = "length"
        self.stopped = False
        self._paused = 0.0
        self._t0 = ctx.clock()

    @property
    def remaining(self) -> int:
        return self.ctx.params.max_new_tokens - len(self.out)

    @property
    def done(self) -> bool:
        """True when the run must stop: budget spent, stop token emitted, or cancelled."""
        if self.stopped or self.remaining <= 0:
            return True
        if self.ctx.cancelled():
            self.finish = "cancelled"
            return True
        return False

    def draft_rows(self, drafts: Sequence[int], n_accepted: int, q=None, p=None, acc=None) -> list[DraftRow]:
        disp = self.ctx.family.display
        return [
            DraftRow(d, disp(d), r(q[i]) if q else None, r(p[i]) if p else None,
                     r(acc[i]) if acc else (1.0 if i < n_accepted else 0.0), status_of(i, n_accepted), i - 1)
            for i, d in enumerate(drafts)
        ]

    def commit(self, tokens: Sequence[int], last_kind: EmitKind, draft: list[DraftRow], **fields) -> Iteration:
        """Emit ``tokens`` (accepted drafts, then one token of ``last_kind``) as a new iteration."""
        stop_ids = self.ctx.family.stop_ids
        kinds: list[EmitKind] = [KIND_ACCEPTED] * (len(tokens) - 1) + [last_kind]
        tokens = list(tokens[: self.remaining])
        for j, t in enumerate(tokens):
            if t in stop_ids:
                tokens = tokens[: j + 1]
                self.stopped = True
                self.finish = "eos"
                break
        kinds = kinds[: len(tokens)]
        disp = self.ctx.family.display
        elapsed = self.ctx.clock() - self._t0 - self._paused
        it = Iteration(k=len(self.iters), pos=len(self.out), draft=draft,
                       emit=[Emitted(t, disp(t), k) for t, k in zip(tokens, kinds, strict=False)],
                       t_end_ms=ms(elapsed), **fields)
        self.iters.append(it)
        self.out.extend(tokens)
        self.seq.extend(tokens)
        self.kinds.extend(kinds)
        self.tok_iter.extend([it.k] * len(tokens))
        return it

    def commit_verified(self, drafts: Sequence[int], n_accepted: int, next_token: int, rows: list[DraftRow],
                        **fields) -> Iteration:
        """Emit the accepted drafts and the target's next token: a fix after a rejection, a
        bonus after a fully accepted draft, a plain step when nothing was drafted."""
        g = len(drafts)
        kind: EmitKind = KIND_AR if g == 0 else (KIND_BONUS if n_accepted == g else KIND_FIXED)
        return self.commit(list(drafts[:n_accepted]) + [next_token], kind, rows, **fields)

    def yielding(self, it: Iteration) -> Generator[Iteration, None, None]:
        """``yield from builder.yielding(it)``: hand ``it`` out without counting the consumer's time."""
        t = self.ctx.clock()
        yield it
        self._paused += self.ctx.clock() - t

    def finish_run(self, runners: dict[str, KVRunner]) -> Run:
        wall = self.ctx.clock() - self._t0 - self._paused
        fam = self.ctx.family
        wall_ms = round(1000 * wall, 3)
        time_ms: dict[str, float | None] = {"wall": wall_ms}
        for name, runner in runners.items():
            one = runner.mean_seconds(1)
            time_ms[f"{name}_fwd_mean"] = None if one is None else round(1000 * one, 3)
            time_ms[f"{name}_total"] = round(1000 * sum(f.seconds for f in runner.log), 3)
            if runner.catch_up:  # a following draft's copies of the target's cache, timed apart
                time_ms[f"{name}_catch_up"] = round(1000 * sum(f.seconds for f in runner.catch_up), 3)
        if self.iters:  # the first iteration prefills the prompt: time to first token, then decoding
            first_ms = self.iters[0].t_end_ms
            assert first_ms is not None  # commit stamps every iteration
            time_ms["ttft"] = first_ms
            time_ms["decode"] = round(wall_ms - first_ms, 3)
        time_ms["draft"] = round(sum(it.t_draft_ms for it in self.iters), 3)
        time_ms["verify"] = round(sum(it.t_verify_ms for it in self.iters), 3)
        return Run(
            label=self.label,
            method=self.method,
            ids=list(self.out),
            kinds=list(self.kinds),
            tok_iter=list(self.tok_iter),
            iters=self.iters,
            finish=self.finish,
            text=fam.decode(self.out),
            tokens=[fam.display(t) for t in self.out],
            n_forward={name: runner.n_forward for name, runner in runners.items()},
            n_positions={name: runner.n_positions for name, runner in runners.items()},
            # a helper's mean is None when it ran no one-token forward: Run.time_ms (records/run.py,
            # being rewritten) says dict[str, float] but its validation reads optional numbers
            time_ms=time_ms,  # type: ignore[arg-type]
        )


def draft_chain(D, seq: Sequence[int], budget: int, step: Callable,
                keep_going: Callable | None = None) -> tuple[list, list]:
    """Up to ``budget`` helper forwards after ``seq``, each drafting from the one before, tokens
    kept on the device. ``step(logits_row) -> (token [1], q or None)`` picks each draft;
    ``keep_going(logits_row, token, q) -> bool``, when given, may end the draft early (an
    adaptive draft length). Returns the draft tokens and the q rows. The helper caches every
    draft but the last (name them afterwards)."""
    logits = D.run(seq)
    drafts: list[torch.Tensor] = []
    q_rows: list[torch.Tensor | None] = []
    for i in range(budget):
        if i:
            logits = D.extend(drafts[-1])
        token, q = step(logits[0])
        drafts.append(token)
        q_rows.append(q)
        if keep_going is not None and not keep_going(logits[0], token, q):  # called for the last one too
            break
    return drafts, q_rows


def mode_text(params: DecodeParams) -> str:
    """How a run samples, for its label: "greedy" or "sampling, T=0.7"."""
    return "greedy" if params.greedy else f"sampling, T={params.temperature:g}"


def ms(seconds: float) -> float:
    return round(1000 * seconds, 3)


class HostValues:
    """Reads back, in order, the values packed into the iteration's single host transfer."""

    def __init__(self, flat: list[float]):
        self.flat, self.pos = flat, 0

    @classmethod
    def transfer(cls, parts) -> HostValues:
        """One device-to-host copy of every tensor in ``parts`` (flattened, in order), packed in
        float32 (MPS has no float64; see `decoders.backends.host.to_host`)."""
        from decoders.backends.host import to_host

        return cls(to_host(parts))

    def take(self, count: int) -> list[float]:
        out = self.flat[self.pos:self.pos + count]
        self.pos += count
        return out

    def ints(self, count: int) -> list[int]:
        return [int(x) for x in self.take(count)]

    def top_entries(self, rows: int, k: int, disp) -> list[list[TopEntry]]:
        """``rows`` x top-k, packed as all indices then all values."""
        ids, vals = self.take(rows * k), self.take(rows * k)
        return [[TopEntry(int(ids[i * k + j]), disp(int(ids[i * k + j])), r(vals[i * k + j])) for j in range(k)]
                for i in range(rows)]
