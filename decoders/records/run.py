"""Run records: what a decoding method did, iteration by iteration, declared once as msgspec
Structs that encode, decode and check themselves (`decoders.records.codec.Record`).

The field names (draft rows of token, q, p, acceptance probability and status; emitted tokens
with their kind) are those the project started from, so saved runs stay readable. Records hold
plain Python values only (no tensors), so a saved run can be browsed without torch or a model.
Detail kinds are declared by the method modules (`decoders.records.details`); the saved-file
format, its old-schema migration and its one-line errors are `decoders.records.files`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar

import msgspec

from decoders.records.bounds import Count, Label, Ms, PerIteration, PerStep, PerToken, Prob, TokenId, TokenText
from decoders.records.codec import Record, convert
from decoders.records.details import DETAIL_KINDS, Detail, TopK, detail_union, register_detail
from decoders.records.family_info import FamilyInfo
from decoders.records.kinds import STATUS_ACCEPTED, STATUS_REJECTED, EmitKind
from decoders.records.rows import CHAIN, DraftRow, Emitted, TopEntry
from decoders.records.summary import Summary

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "CHAIN", "DETAIL_KINDS", "SCHEMA_VERSION", "Detail", "DraftRow", "Emitted",
    "Iteration", "Run", "RunResult", "TopEntry", "TopK", "detail_union", "register_detail",
]

SCHEMA_VERSION = 2  # 2: Iteration.detail tagged by kind, DraftRow.parent; schema 1 still loads

D = TypeVar("D", bound=Detail)


def compact_rows(it: dict[str, Any]) -> dict[str, Any]:
    """A saved iteration's chain rows leave their parent out (the row before is implied)."""
    it["draft"] = [row[:6] if row[6] == i - 1 else row for i, row in enumerate(it["draft"])]
    return it


class Iteration(Record, Generic[D], omit_defaults=True):
    """One draft-and-verify step (or one plain step for autoregressive decoding). Read as
    ``Iteration[detail_union()]``, which `from_json` does."""

    k: Count  # index of the iteration
    pos: Count  # number of tokens emitted before it
    draft: Annotated[list[DraftRow], PerStep]
    emit: Annotated[list[Emitted], PerStep]
    t_draft_ms: Ms = 0.0
    t_verify_ms: Ms = 0.0
    t_end_ms: Ms | None = None  # when its tokens were out, from the run's start (consumer time excluded)
    beta: Annotated[list[Prob], PerStep] = msgspec.field(default_factory=list)  # sum(min(p, q)) at each position
    detail: D | None = None  # the method's own record of the iteration (see `Detail`)
    draft_stop: Label = ""  # why the draft ended where it did, under an adaptive policy (see draft_policy.STOP_TEXT)

    def __post_init__(self) -> None:
        for i, row in enumerate(self.draft):
            if row.parent == CHAIN:
                row.parent = i - 1

    @property
    def n_accepted(self) -> int:
        return sum(1 for r in self.draft if r.status == STATUS_ACCEPTED)

    @property
    def n_judged(self) -> int:
        """Drafts the target judged: the accepted ones and the rejected ones (drafts after a
        rejection in a chain, or on a branch not taken, are never judged)."""
        return sum(1 for r in self.draft if r.status in (STATUS_ACCEPTED, STATUS_REJECTED))

    def to_json(self) -> dict[str, Any]:
        return compact_rows(msgspec.to_builtins(self))

    @classmethod
    def from_json(cls, data: Any, details: Iterable[type[Detail]] | None = None) -> Iteration:
        return convert(data, cls[detail_union(details)], root="the iteration")  # type: ignore[index]


class Run(Record, Generic[D]):
    """A finished (or cancelled) decode of one method on one prompt."""

    label: Label
    method: Label  # ar | spec | pld | jacobi | ...
    ids: Annotated[list[TokenId], PerToken]
    kinds: Annotated[list[EmitKind], PerToken]
    tok_iter: Annotated[list[Count], PerToken]  # iteration index of each emitted token
    finish: Label  # length | eos | context | cancelled
    text: str = ""
    tokens: Annotated[list[TokenText], PerToken] = msgspec.field(default_factory=list)  # display text of each token
    n_forward: dict[str, Count] = msgspec.field(default_factory=dict)  # {"main": .., "helper": ..}
    n_positions: dict[str, Count] = msgspec.field(default_factory=dict)  # positions processed per model
    time_ms: dict[str, Ms | None] = msgspec.field(default_factory=dict)  # wall, main_fwd_mean, ..., draft, verify
    iters: Annotated[list[Iteration[D]], PerIteration] = msgspec.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = msgspec.to_builtins(self)
        for it in out["iters"]:
            compact_rows(it)
        return out

    @classmethod
    def from_json(cls, data: Any, details: Iterable[type[Detail]] | None = None) -> Run:
        return convert(data, cls[detail_union(details)], root="the run")  # type: ignore[index]


class RunResult(msgspec.Struct, kw_only=True):
    """A method run beside the autoregressive baseline it is measured against. On disk (see
    `decoders.records.files.RunFile`): ``{schema, summary, params, prompt, prompt_ids, family,
    runs: {baseline, method}}``."""

    method: Run
    baseline: Run
    summary: Summary
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    prompt: str = ""
    prompt_ids: list[int] = msgspec.field(default_factory=list)
    family: FamilyInfo = msgspec.field(default_factory=FamilyInfo)  # the models, draft, device and dtype

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA_VERSION, "summary": self.summary.to_json(), "params": self.params,
                "prompt": self.prompt, "prompt_ids": self.prompt_ids, "family": self.family.to_json(),
                "runs": {"baseline": self.baseline.to_json(), "method": self.method.to_json()}}

    @classmethod
    def from_json(cls, data: Any, details: Iterable[type[Detail]] | None = None) -> RunResult:
        from decoders.records.files import from_plain

        return from_plain(data, details)

    def dumps(self) -> str:
        from decoders.records.files import dumps

        return dumps(self)

    def save(self, path: str | Path, exclusive: bool = False) -> Path:
        """Write the run atomically (the file is the old one or the whole new one, never half of
        either); `decoders.records.atomic.WriteError` (a DecodeError and an OSError) when it cannot be.
        ``exclusive``: never over a file that is there (errno EEXIST)."""
        from decoders.records.files import save

        return save(self, Path(path), exclusive)

    @classmethod
    def load(cls, path: str | Path, details: Iterable[type[Detail]] | None = None) -> RunResult:
        """A saved run, every field's type checked (a hand-edited or damaged file must fail here,
        in one line naming the field, not later in the app); DecodeError otherwise. Its details
        are read as ``details`` or as the kinds registered so far (see `decoders.records.details`)."""
        from decoders.records.files import load

        return load(Path(path), details)
