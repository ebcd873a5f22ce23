"""The types of everything in a saved run's JSON, checked before it is read: a hand-edited or
damaged file fails here in one line naming the first bad field, not later in the app. The detail
kinds are given by the caller (`decoders.records.run.DETAIL_KINDS`), so this module knows no run type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from decoders.records.kinds import EMIT_KINDS, STATUS_ACCEPTED, STATUS_REJECTED, STATUS_UNVERIFIED


def check_run_record(d: Any, detail_kinds: Mapping[str, type]) -> None:
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
            _check_iteration(f"{at}.iters[{i}]", it, detail_kinds, check, list_of, is_int, is_num, opt_num)


def _check_iteration(at: str, it: dict, detail_kinds: Mapping[str, type], check, list_of, is_int, is_num,
                     opt_num) -> None:
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
            cls = detail_kinds.get(detail.get("kind"))
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
