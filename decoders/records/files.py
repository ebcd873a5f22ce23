"""The saved-run file: its declared shape (`RunFile`), the schema-1 migration, bounded reads,
atomic writes and one-line errors naming the file and the field.

Schema 1 kept each method's detail in its own key of an iteration (``top``, ``pld``, ``jacobi``);
`migrate` moves it to ``detail`` with its ``kind`` before the file is checked, so both schemas are
checked by the same declared types.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec

from decoders.core.errors import DecodeError
from decoders.records.codec import one_line
from decoders.records.details import Detail, detail_union
from decoders.records.inputs import read_bytes
from decoders.records.run import MAX_RUN_BYTES, Run, RunResult
from decoders.records.summary import Summary

D = TypeVar("D", bound=Detail)

HINT = "save runs with ctrl+s or `tui-decode run --json PATH`"
_SCHEMA1_KEYS = (("top", "topk"), ("pld", "lookup"), ("jacobi", "jacobi"))


class Runs(msgspec.Struct, Generic[D]):
    baseline: Run[D]
    method: Run[D]


class RunFile(msgspec.Struct, Generic[D], kw_only=True):
    """A saved run as it is on disk."""

    schema: int = 1
    summary: Summary
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    prompt: str = ""
    prompt_ids: list[int] = msgspec.field(default_factory=list)
    family: dict[str, Any] = msgspec.field(default_factory=dict)
    runs: Runs[D]


def migrate(data: Any) -> Any:
    """Schema 1's detail keys as schema 2's tagged ``detail``; an empty detail as none. Anything
    not shaped like a run is left for the declared types to name."""
    runs = data.get("runs") if isinstance(data, dict) else None
    for run in runs.values() if isinstance(runs, dict) else ():
        iters = run.get("iters") if isinstance(run, dict) else None
        for it in iters if isinstance(iters, list) else ():
            if not isinstance(it, dict):
                continue
            if "detail" in it:
                if not it["detail"]:
                    del it["detail"]
                continue
            for key, kind in _SCHEMA1_KEYS:
                old = it.pop(key, None)
                if old and isinstance(old, dict) and "detail" not in it:
                    it["detail"] = {"kind": kind, **old}
    return data


def _check_lengths(run: Run, at: str) -> None:
    for key in ("kinds", "tok_iter") + (("tokens",) if run.tokens else ()):
        if len(getattr(run, key)) != len(run.ids):
            raise DecodeError(f"{at}.{key} has {len(getattr(run, key))} entries for {len(run.ids)} tokens")


def check_params(params: dict[str, Any]) -> None:
    """The saved parameters as the app will apply them: a registered method and every value within
    its declared bounds (the app sets its panes from them when the run is opened)."""
    from decoders.core.declarations import method_names
    from decoders.core.params import DecodeParams

    method = params.get("method")
    if not isinstance(method, str) or method not in method_names():
        shown = repr(method)[:60]
        raise DecodeError(f"params.method is {shown}, not a method this version has "
                          f"({', '.join(method_names())})")
    try:
        DecodeParams.from_json(params).validated(ui=True)
    except DecodeError as exc:
        raise DecodeError(f"params: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise DecodeError(f"params: {type(exc).__name__}: {str(exc)[:200]}") from None


def from_plain(data: Any, details: Iterable[type[Detail]] | None = None) -> RunResult:
    """A run record from plain JSON values (either schema); DecodeError naming the first bad field."""
    data = migrate(data)
    try:
        f = msgspec.convert(data, RunFile[detail_union(details)])  # type: ignore[index,misc]  # a union built at run time
    except msgspec.ValidationError as exc:
        raise DecodeError(one_line(exc, data, root="the run")) from None
    f.summary.extras = {k: v for k, v in data["summary"].items() if k not in Summary.__struct_fields__}
    for name in ("baseline", "method"):
        _check_lengths(getattr(f.runs, name), f"runs.{name}")
    if f.params:
        check_params(f.params)
    return RunResult(method=f.runs.method, baseline=f.runs.baseline, summary=f.summary, params=f.params,
                     prompt=f.prompt, prompt_ids=f.prompt_ids, family=f.family)


def dumps(result: RunResult) -> str:
    """The run as JSON text that is valid UTF-8: a lone surrogate (which no UTF-8 file can hold,
    and which the reader refuses even escaped) is written as U+FFFD, so the rest is never lost."""
    text = json.dumps(result.to_json(), ensure_ascii=False, indent=1)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def save(result: RunResult, path: Path) -> Path:
    from decoders.records import atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise atomic.write_error(path, err, "the run") from None
    return atomic.write_text(path, dumps(result), what="the run")


def load(path: Path, details: Iterable[type[Detail]] | None = None) -> RunResult:
    raw = read_bytes(path, "the saved run", MAX_RUN_BYTES, "give the path of a RUN.json file written by tui-decode")
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise DecodeError(f"{path} is not UTF-8 text (byte {raw[bad.start]:#04x} at offset {bad.start}); "
                              f"{HINT}") from None
        raise DecodeError(f"{path} is not a tui-decode run record ({type(exc).__name__}: {exc}); {HINT}") from None
    try:
        return from_plain(data, details)
    except DecodeError as exc:
        raise DecodeError(f"{path} is not a valid tui-decode run record: {exc}; {HINT}") from None
