"""Run records: what a decoding method did, iteration by iteration, in a JSON-ready shape.

The field names follow the user's sketch (`shared/reference/parallel.py`) so that saved runs
stay readable by anyone who knows it. Records hold plain Python values only (no tensors), so a
saved run can be browsed without torch or a model.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

# How each emitted token came to be.
KIND_ACCEPTED = "acc"  # a draft token the target accepted
KIND_FIXED = "fix"  # the target's own token where a draft was rejected
KIND_BONUS = "bonus"  # the target's extra token after every draft passed
KIND_AR = "ar"  # a plain autoregressive step, no draft
EMIT_KINDS = (KIND_ACCEPTED, KIND_FIXED, KIND_BONUS, KIND_AR)

# Status of a draft row.
STATUS_ACCEPTED = "acc"
STATUS_REJECTED = "rej"
STATUS_UNVERIFIED = "unv"  # after the first rejection: never judged


@dataclass
class DraftRow:
    """One drafted token and how verification judged it."""

    token: int
    text: str
    q: float | None  # helper probability of the token (None: no helper model)
    p: float | None  # target probability of the token
    acc_prob: float | None  # probability that verification accepts it
    status: str  # acc | rej | unv

    def to_json(self) -> list:
        return [self.token, self.text, self.q, self.p, self.acc_prob, self.status]

    @classmethod
    def from_json(cls, row: list) -> DraftRow:
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


@dataclass
class PLDMatch:
    """Where prompt lookup found its draft: the n-gram and the position its continuation starts."""

    start: int  # index in the full sequence (prompt + output) where the copied tokens start
    n: int  # length of the matched n-gram
    in_prompt: bool
    ngram: list[str]


@dataclass
class JacobiBlock:
    before: list[list]  # [[token, text], ...] the guesses fed in
    after: list[list]  # [[token, text], ...] the model's greedy answer at each guess
    fixed: int  # tokens committed by this iteration


@dataclass
class Iteration:
    """One draft-and-verify step (or one plain step for autoregressive decoding)."""

    k: int  # index of the iteration
    pos: int  # number of tokens emitted before it
    draft: list[DraftRow]
    emit: list[Emitted]
    t_draft_ms: float = 0.0
    t_verify_ms: float = 0.0
    beta: list[float] = field(default_factory=list)  # sum(min(p, q)) at each verified position
    top: dict[str, list[list[TopEntry]]] | None = None  # {"p": [...], "q": [...]} per draft position
    pld: PLDMatch | None = None
    jacobi: JacobiBlock | None = None

    @property
    def n_accepted(self) -> int:
        return sum(1 for r in self.draft if r.status == STATUS_ACCEPTED)

    def to_json(self) -> dict:
        out: dict[str, Any] = {
            "k": self.k,
            "pos": self.pos,
            "draft": [r.to_json() for r in self.draft],
            "emit": [e.to_json() for e in self.emit],
            "t_draft_ms": self.t_draft_ms,
            "t_verify_ms": self.t_verify_ms,
        }
        if self.beta:
            out["beta"] = self.beta
        if self.top is not None:
            out["top"] = {key: [[e.to_json() for e in pos] for pos in rows] for key, rows in self.top.items()}
        if self.pld is not None:
            out["pld"] = asdict(self.pld)
        if self.jacobi is not None:
            out["jacobi"] = asdict(self.jacobi)
        return out

    @classmethod
    def from_json(cls, d: dict) -> Iteration:
        top = d.get("top")
        return cls(
            k=d["k"],
            pos=d["pos"],
            draft=[DraftRow.from_json(r) for r in d["draft"]],
            emit=[Emitted.from_json(e) for e in d["emit"]],
            t_draft_ms=d.get("t_draft_ms", 0.0),
            t_verify_ms=d.get("t_verify_ms", 0.0),
            beta=d.get("beta", []),
            top=None if top is None else {
                key: [[TopEntry.from_json(e) for e in pos] for pos in rows] for key, rows in top.items()
            },
            pld=PLDMatch(**d["pld"]) if d.get("pld") else None,
            jacobi=JacobiBlock(**d["jacobi"]) if d.get("jacobi") else None,
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
    summary: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    prompt: str = ""
    prompt_ids: list[int] = field(default_factory=list)
    family: dict[str, Any] = field(default_factory=dict)  # label, main, helper, device, dtype

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA_VERSION,
            "summary": self.summary,
            "params": self.params,
            "prompt": self.prompt,
            "prompt_ids": self.prompt_ids,
            "family": self.family,
            "runs": {"baseline": self.baseline.to_json(), "method": self.method.to_json()},
        }

    @classmethod
    def from_json(cls, d: dict) -> RunResult:
        return cls(
            method=Run.from_json(d["runs"]["method"]),
            baseline=Run.from_json(d["runs"]["baseline"]),
            summary=d["summary"],
            params=d.get("params", {}),
            prompt=d.get("prompt", ""),
            prompt_ids=d.get("prompt_ids", []),
            family=d.get("family", {}),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=1)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.dumps(), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> RunResult:
        from decoders.errors import DecodeError

        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls.from_json(data)
        except FileNotFoundError:
            raise DecodeError(f"no saved run at {path}; give the path of a RUN.json written by tui-decode") from None
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise DecodeError(f"{path} is not a tui-decode run record ({type(exc).__name__}: {exc}); "
                              "save runs with ctrl+s or `tui-decode run --json PATH`") from None
