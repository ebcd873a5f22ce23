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

if TYPE_CHECKING:
    from decoders.analysis.summary import Summary

SCHEMA_VERSION = 2  # 2: Iteration.detail tagged by kind, DraftRow.parent; schema 1 still loads

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
            check_run_record(data)
            return cls.from_json(data)
        except DecodeError as exc:
            raise DecodeError(f"{path} is not a valid tui-decode run record: {exc}; {hint}") from None
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, IndexError,
                RecursionError) as exc:
            raise DecodeError(f"{path} is not a tui-decode run record ({type(exc).__name__}: {exc}); "
                              f"{hint}") from None


#: A saved run larger than this is refused unread (a run of the longest budget is far smaller).
MAX_RUN_BYTES = 1 << 30


def check_run_record(d: Any) -> None:
    """Check the types of everything in a saved run's JSON besides the summary (which
    `Summary.from_json` checks); DecodeError naming the first bad field."""
    from decoders.core.errors import DecodeError

    def fail(where: str, want: str, value: Any) -> None:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise DecodeError(f"{where} must be {want}, got {shown}")

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def is_num(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def check(where: str, value: Any, ok, want: str) -> None:
        if not ok(value):
            fail(where, want, value)

    def list_of(where: str, value: Any, ok, want: str) -> None:
        check(where, value, lambda v: isinstance(v, list), f"a list of {want}")
        for i, item in enumerate(value):
            check(f"{where}[{i}]", item, ok, want)

    def dict_of(where: str, value: Any, ok, want: str) -> None:
        check(where, value, lambda v: isinstance(v, dict), f"an object of {want}")
        for key, item in value.items():
            check(f"{where}.{key}", item, ok, want)

    opt_num = lambda v: v is None or is_num(v)  # noqa: E731
    check("the run", d, lambda v: isinstance(v, dict), "an object")
    for key, ok, want in (("params", lambda v: isinstance(v, dict), "an object"),
                          ("prompt", lambda v: isinstance(v, str), "text"),
                          ("family", lambda v: isinstance(v, dict), "an object")):
        if key in d:
            check(key, d[key], ok, want)
    if "prompt_ids" in d:
        list_of("prompt_ids", d["prompt_ids"], is_int, "integers")
    check("runs", d.get("runs"), lambda v: isinstance(v, dict) and "method" in v and "baseline" in v,
          "an object with a method and a baseline run")
    for name in ("baseline", "method"):
        run, at = d["runs"][name], f"runs.{name}"
        check(at, run, lambda v: isinstance(v, dict), "an object")
        for key in ("label", "method", "finish", "text"):
            if key in run:
                check(f"{at}.{key}", run[key], lambda v: isinstance(v, str), "text")
        for key in ("ids", "kinds", "tok_iter", "label", "method", "finish"):
            if key not in run:
                raise DecodeError(f"{at} has no {key}")
        list_of(f"{at}.ids", run["ids"], is_int, "integers")
        list_of(f"{at}.kinds", run["kinds"], lambda v: v in EMIT_KINDS, f"kinds ({', '.join(EMIT_KINDS)})")
        list_of(f"{at}.tok_iter", run["tok_iter"], is_int, "integers")
        list_of(f"{at}.tokens", run.get("tokens", []), lambda v: isinstance(v, str), "text")
        for key in ("kinds", "tok_iter") + (("tokens",) if run.get("tokens") else ()):
            if len(run[key]) != len(run["ids"]):
                raise DecodeError(f"{at}.{key} has {len(run[key])} entries for {len(run['ids'])} tokens")
        for key in ("n_forward", "n_positions"):
            dict_of(f"{at}.{key}", run.get(key, {}), is_int, "integers")
        dict_of(f"{at}.time_ms", run.get("time_ms", {}), opt_num, "numbers")
        list_of(f"{at}.iters", run.get("iters", []), lambda v: isinstance(v, dict), "objects")
        for i, it in enumerate(run.get("iters", [])):
            _check_iteration(f"{at}.iters[{i}]", it, check, list_of, is_int, is_num, opt_num)


def _check_iteration(at: str, it: dict, check, list_of, is_int, is_num, opt_num) -> None:
    from decoders.core.errors import DecodeError

    for key in ("k", "pos"):
        check(f"{at}.{key}", it.get(key), is_int, "an integer")
    for key in ("t_draft_ms", "t_verify_ms"):
        if key in it:
            check(f"{at}.{key}", it[key], is_num, "a number")
    list_of(f"{at}.beta", it.get("beta", []), is_num, "numbers")

    def row_ok(row: Any) -> bool:
        return (isinstance(row, list) and len(row) in (6, 7) and is_int(row[0]) and isinstance(row[1], str)
                and all(opt_num(v) for v in row[2:5])
                and row[5] in (STATUS_ACCEPTED, STATUS_REJECTED, STATUS_UNVERIFIED)
                and (len(row) == 6 or is_int(row[6])))

    list_of(f"{at}.draft", it.get("draft"), row_ok, "draft rows [token, text, q, p, acc_prob, acc|rej|unv]")
    list_of(f"{at}.emit", it.get("emit"),
            lambda r: isinstance(r, list) and len(r) == 3 and is_int(r[0]) and isinstance(r[1], str)
            and r[2] in EMIT_KINDS, "emitted tokens [token, text, kind]")
    detail = it.get("detail")
    if detail is not None:
        check(f"{at}.detail", detail, lambda v: isinstance(v, dict), "an object")
        if detail.get("kind") == "topk":
            def entry(e: Any) -> bool:
                return isinstance(e, list) and len(e) == 3 and is_int(e[0]) and isinstance(e[1], str) and is_num(e[2])

            for side in ("p", "q"):
                list_of(f"{at}.detail.{side}", detail.get(side), lambda v: isinstance(v, list), "lists")
                for j, pos in enumerate(detail[side]):
                    list_of(f"{at}.detail.{side}[{j}]", pos, entry, "[token, text, prob] entries")
        elif detail:
            cls = DETAIL_KINDS.get(detail.get("kind"))
            if cls is None:
                raise DecodeError(f"{at}.detail has an unknown kind {detail.get('kind')!r}")
            _check_detail_fields(f"{at}.detail", cls, detail, check)


def _check_detail_fields(at: str, cls: type, detail: dict, check) -> None:
    """A method's own detail record: each declared field of a simple type (int, bool, str, list)
    must hold a value of that type."""
    kinds = {"int": lambda v: isinstance(v, int) and not isinstance(v, bool), "bool": lambda v: isinstance(v, bool),
             "str": lambda v: isinstance(v, str), "float": lambda v: isinstance(v, (int, float))
             and not isinstance(v, bool)}
    for f in fields(cls):
        if f.name not in detail:
            continue
        declared = str(f.type).replace("typing.", "")
        base = declared.split("[", 1)[0].strip()
        if base in kinds:
            check(f"{at}.{f.name}", detail[f.name], kinds[base], f"a value of type {base}")
        elif base == "list":
            check(f"{at}.{f.name}", detail[f.name], lambda v: isinstance(v, list), "a list")
