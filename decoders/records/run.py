"""Run records: what a decoding method did, iteration by iteration, in a JSON-ready shape.

The field names (draft rows of token, q, p, acceptance probability and status; emitted tokens
with their kind) are those the project started from, so saved runs stay readable. Records hold
plain Python values only (no tensors), so a saved run can be browsed without torch or a model.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from decoders.records.checks import check_run_record
from decoders.records.kinds import (  # noqa: F401 (the run record's vocabulary, importable with it)
    EMIT_KINDS,
    KIND_ACCEPTED,
    KIND_AR,
    KIND_BONUS,
    KIND_FIXED,
    STATUS_ACCEPTED,
    STATUS_REJECTED,
    STATUS_UNVERIFIED,
)

if TYPE_CHECKING:
    from decoders.analysis.summary import Summary

SCHEMA_VERSION = 2  # 2: Iteration.detail tagged by kind, DraftRow.parent; schema 1 still loads



@dataclass
class DraftRow:
    """One drafted token and how verification judged it."""

    token: int
    text: str
    q: float | None  # helper probability of the token (None: no helper model)
    p: float | None  # target probability of the token
    acc_prob: float | None  # probability that verification accepts it
    status: str  # acc | rej | unv
    parent: int = -1  # index of the draft row this one continues; -1: the sequence so far

    def to_json(self, index: int | None = None) -> list:
        """``[token, text, q, p, acc_prob, status]``, and the parent when the row at ``index`` does
        not simply continue the row before it (a tree)."""
        row = [self.token, self.text, self.q, self.p, self.acc_prob, self.status]
        return row if index is not None and self.parent == index - 1 else row + [self.parent]

    @classmethod
    def from_json(cls, row: list, index: int = 0) -> DraftRow:
        """A row without a parent continues the row before it (a chain)."""
        if len(row) == 6:
            return cls(*row, parent=index - 1)
        return cls(*row)


@dataclass
class Emitted:
    token: int
    text: str
    kind: str

    def to_json(self) -> list:
        return [self.token, self.text, self.kind]

    @classmethod
    def from_json(cls, row: list) -> Emitted:
        return cls(*row)


@dataclass
class TopEntry:
    token: int
    text: str
    prob: float

    def to_json(self) -> list:
        return [self.token, self.text, self.prob]

    @classmethod
    def from_json(cls, row: list) -> TopEntry:
        return cls(*row)


class Detail:
    """What one method's iteration records beyond the drafts: a dataclass with a ``kind``.

    Subclasses register with `register_detail`, which gives them a JSON form
    ``{"kind": ..., **fields}``; a method module defines its own detail next to the method.
    """

    kind: ClassVar[str] = ""

    def to_json(self) -> dict:
        return {"kind": self.kind, **asdict(self)}

    @classmethod
    def from_json(cls, d: dict) -> Detail:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


DETAIL_KINDS: dict[str, type[Detail]] = {}


def register_detail(cls: type[Detail]) -> type[Detail]:
    """Class decorator: make ``cls`` (with its ``kind``) loadable from saved runs."""
    if not cls.kind:
        raise ValueError(f"{cls.__name__} needs a kind")
    DETAIL_KINDS[cls.kind] = cls
    return cls


def detail_from_json(d: dict | None) -> Detail | None:
    if not d:
        return None
    # importing `decoders` registers every method, and with it its detail kind: no registry lookup here
    cls = DETAIL_KINDS.get(d.get("kind"))
    if cls is None:
        raise KeyError(f"unknown iteration detail kind {d.get('kind')!r}")
    return cls.from_json(d)


@register_detail
@dataclass
class TopK(Detail):
    """The top-k of the target's p at each draft position and after the last (the bonus
    position), and of the helper's q at each draft position."""

    kind: ClassVar[str] = "topk"
    p: list[list[TopEntry]]
    q: list[list[TopEntry]]

    def to_json(self) -> dict:
        return {"kind": self.kind, "p": [[e.to_json() for e in pos] for pos in self.p],
                "q": [[e.to_json() for e in pos] for pos in self.q]}

    @classmethod
    def from_json(cls, d: dict) -> TopK:
        return cls(p=[[TopEntry.from_json(e) for e in pos] for pos in d["p"]],
                   q=[[TopEntry.from_json(e) for e in pos] for pos in d["q"]])


def _schema1_detail(d: dict) -> Detail | None:
    """Schema 1 kept each method's detail in its own key: top, pld, jacobi."""
    if d.get("top"):
        return TopK.from_json(d["top"])
    if d.get("pld"):
        return detail_from_json({"kind": "lookup", **d["pld"]})
    if d.get("jacobi"):
        return detail_from_json({"kind": "jacobi", **d["jacobi"]})
    return None


@dataclass
class Iteration:
    """One draft-and-verify step (or one plain step for autoregressive decoding)."""

    k: int  # index of the iteration
    pos: int  # number of tokens emitted before it
    draft: list[DraftRow]
    emit: list[Emitted]
    t_draft_ms: float = 0.0
    t_verify_ms: float = 0.0
    t_end_ms: float | None = None  # when its tokens were out, from the run's start (consumer time excluded)
    beta: list[float] = field(default_factory=list)  # sum(min(p, q)) at each verified position
    detail: Detail | None = None  # the method's own record of the iteration (see `Detail`)
    draft_stop: str = ""  # why the draft ended where it did, under an adaptive policy (see draft_policy.STOP_TEXT)

    @property
    def n_accepted(self) -> int:
        return sum(1 for r in self.draft if r.status == STATUS_ACCEPTED)

    @property
    def n_judged(self) -> int:
        """Drafts the target judged: the accepted ones and the rejected ones (drafts after a
        rejection in a chain, or on a branch not taken, are never judged)."""
        return sum(1 for r in self.draft if r.status in (STATUS_ACCEPTED, STATUS_REJECTED))

    def to_json(self) -> dict:
        out: dict[str, Any] = {
            "k": self.k,
            "pos": self.pos,
            "draft": [r.to_json(i) for i, r in enumerate(self.draft)],
            "emit": [e.to_json() for e in self.emit],
            "t_draft_ms": self.t_draft_ms,
            "t_verify_ms": self.t_verify_ms,
        }
        if self.t_end_ms is not None:
            out["t_end_ms"] = self.t_end_ms
        if self.beta:
            out["beta"] = self.beta
        if self.detail is not None:
            out["detail"] = self.detail.to_json()
        if self.draft_stop:
            out["draft_stop"] = self.draft_stop
        return out

    @classmethod
    def from_json(cls, d: dict) -> Iteration:
        return cls(
            k=d["k"],
            pos=d["pos"],
            draft=[DraftRow.from_json(r, i) for i, r in enumerate(d["draft"])],
            emit=[Emitted.from_json(e) for e in d["emit"]],
            t_draft_ms=d.get("t_draft_ms", 0.0),
            t_verify_ms=d.get("t_verify_ms", 0.0),
            t_end_ms=d.get("t_end_ms"),
            beta=d.get("beta", []),
            detail=detail_from_json(d["detail"]) if "detail" in d else _schema1_detail(d),
            draft_stop=str(d.get("draft_stop", "")),
        )


@dataclass
class Run:
    """A finished (or cancelled) decode of one method on one prompt."""

    label: str
    method: str  # ar | spec | pld | jacobi
    ids: list[int]
    kinds: list[str]
    tok_iter: list[int]  # iteration index of each emitted token
    iters: list[Iteration]
    finish: str  # length | eos | context | cancelled
    text: str = ""
    tokens: list[str] = field(default_factory=list)  # display text of each emitted token
    n_forward: dict[str, int] = field(default_factory=dict)  # {"main": .., "helper": ..}
    n_positions: dict[str, int] = field(default_factory=dict)  # positions processed per model
    time_ms: dict[str, float] = field(default_factory=dict)  # wall, main_fwd_mean, helper_fwd_mean, draft, verify

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "iters"}
        d["iters"] = [it.to_json() for it in self.iters]
        return d

    @classmethod
    def from_json(cls, d: dict) -> Run:
        kw = {f.name: d[f.name] for f in fields(cls) if f.name in d and f.name != "iters"}
        return cls(iters=[Iteration.from_json(it) for it in d.get("iters", [])], **kw)


@dataclass
class RunResult:
    """A method run beside the autoregressive baseline it is measured against."""

    method: Run
    baseline: Run
    summary: Summary
    params: dict[str, Any] = field(default_factory=dict)
    prompt: str = ""
    prompt_ids: list[int] = field(default_factory=list)
    family: dict[str, Any] = field(default_factory=dict)  # label, main, helper, device, dtype

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA_VERSION,
            "summary": self.summary.to_json(),
            "params": self.params,
            "prompt": self.prompt,
            "prompt_ids": self.prompt_ids,
            "family": self.family,
            "runs": {"baseline": self.baseline.to_json(), "method": self.method.to_json()},
        }

    @classmethod
    def from_json(cls, d: dict) -> RunResult:
        from decoders.analysis.summary import Summary

        return cls(
            method=Run.from_json(d["runs"]["method"]),
            baseline=Run.from_json(d["runs"]["baseline"]),
            summary=Summary.from_json(d["summary"]),
            params=d.get("params", {}),
            prompt=d.get("prompt", ""),
            prompt_ids=d.get("prompt_ids", []),
            family=d.get("family", {}),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=1)

    def save(self, path: str | Path) -> Path:
        """Write the run atomically (the file is the old one or the whole new one, never half of
        either); `decoders.records.atomic.WriteError` (a DecodeError and an OSError) when it cannot be."""
        from decoders.records import atomic

        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise atomic.write_error(path, err, "the run") from None
        return atomic.write_text(path, self.dumps(), what="the run")

    @classmethod
    def load(cls, path: str | Path) -> RunResult:
        """A saved run, every field's type checked (a hand-edited or damaged file must fail here,
        in one line, not later in the app); DecodeError otherwise."""
        from decoders.core.errors import DecodeError

        path = Path(path)
        hint = "save runs with ctrl+s or `tui-decode run --json PATH`"
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_RUN_BYTES + 1)
        except FileNotFoundError:
            raise DecodeError(f"no saved run at {path}; give the path of a RUN.json written by tui-decode") from None
        except IsADirectoryError:
            raise DecodeError(f"{path} is a folder, not a saved run; give the path of a RUN.json file") from None
        except OSError as exc:
            raise DecodeError(f"cannot read the saved run {path}: {exc.strerror or exc}; "
                              "check the file and its permissions") from None
        if len(raw) > MAX_RUN_BYTES:
            raise DecodeError(f"{path} is larger than {MAX_RUN_BYTES >> 20} MiB, too large for a saved run; {hint}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"{path} is not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start}); "
                              f"{hint}") from None
        try:
            data = json.loads(text)
            check_run_record(data, DETAIL_KINDS)
            return cls.from_json(data)
        except DecodeError as exc:
            raise DecodeError(f"{path} is not a valid tui-decode run record: {exc}; {hint}") from None
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, IndexError,
                RecursionError) as exc:
            raise DecodeError(f"{path} is not a tui-decode run record ({type(exc).__name__}: {exc}); "
                              f"{hint}") from None


#: A saved run larger than this is refused unread (a run of the longest budget is far smaller).
MAX_RUN_BYTES = 1 << 30
