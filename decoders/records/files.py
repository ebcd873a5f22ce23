"""The saved-run file: its declared shape (`RunFile`), the schema-1 migration, bounded reads,
atomic writes and one-line errors naming the file and the field.

Schema 1 kept each method's detail in its own key of an iteration (``top``, ``pld``, ``jacobi``);
`migrate` moves it to ``detail`` with its ``kind`` before the file is checked, so both schemas are
checked by the same declared types.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, Generic, TypeVar

import msgspec

from decoders.core.errors import DecodeError
from decoders.records.bounds import PerPromptToken, Prompt, TokenId, max_run_bytes, size_refusal, unbounded_figure
from decoders.records.codec import json_text, one_line
from decoders.records.details import Detail, detail_union
from decoders.records.family_info import FamilyInfo
from decoders.records.run import SCHEMA_VERSION, Run, RunResult
from decoders.records.summary import Summary

D = TypeVar("D", bound=Detail)

HINT = "save runs with ctrl+s or `tui-decode run --json PATH`"
_SCHEMA1_KEYS = (("top", "topk"), ("pld", "lookup"), ("jacobi", "jacobi"))


class Runs(msgspec.Struct, Generic[D]):
    baseline: Run[D]  # autoregressive decoding of the same prompt, timed with the method
    method: Run[D]  # the method's run


class RunFile(msgspec.Struct, Generic[D], kw_only=True):
    """A saved run as it is on disk."""

    schema: int = 1  # the file's format
    summary: Summary  # the figures, the method's own beside the common ones
    params: dict[str, Any] = msgspec.field(default_factory=dict)  # the decoding parameters (DecodeParams)
    prompt: Prompt = ""  # the prompt as typed
    prompt_ids: Annotated[list[TokenId], PerPromptToken] = msgspec.field(default_factory=list)  # the prompt's token ids
    family: FamilyInfo = msgspec.field(default_factory=FamilyInfo)  # the models, draft, device and dtype that ran it
    runs: Runs[D]  # the baseline's run and the method's


class _Schema(msgspec.Struct):
    schema: int = 1


class _RunFileRead(msgspec.Struct, Generic[D], kw_only=True):
    """`RunFile` with its summary left as JSON text: the fast way a current file is read (typed, in
    one pass, no plain copy of the whole run), its summary read on its own for the method's extras."""

    schema: int = 1
    summary: msgspec.Raw
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    prompt: Prompt = ""
    prompt_ids: Annotated[list[TokenId], PerPromptToken] = msgspec.field(default_factory=list)
    family: FamilyInfo = msgspec.field(default_factory=FamilyInfo)
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
    return _checked(f, data["summary"])


def _checked(f: RunFile | _RunFileRead, summary: dict[str, Any]) -> RunResult:
    """The run read, after the checks its declared types cannot make; ``summary`` as plain JSON."""
    if isinstance(f, _RunFileRead):
        try:
            f = RunFile(schema=f.schema, summary=msgspec.convert(summary, Summary), params=f.params, prompt=f.prompt,
                        prompt_ids=f.prompt_ids, family=f.family, runs=f.runs)
        except msgspec.ValidationError as exc:
            raise DecodeError(one_line(exc, summary, root="summary")) from None
    f.summary.extras = {k: v for k, v in summary.items() if k not in Summary.__struct_fields__}
    unbounded = unbounded_figure(f.summary.extras, "summary")
    unbounded = unbounded or unbounded_figure(f.summary.divergence, "summary.divergence")
    unbounded = unbounded or unbounded_figure(f.family.to_json(), "family") or unbounded_figure(f.params, "params")
    if unbounded:
        raise DecodeError(unbounded)
    for name in ("baseline", "method"):
        _check_lengths(getattr(f.runs, name), f"runs.{name}")
    if f.params:
        check_params(f.params)
    return RunResult(method=f.runs.method, baseline=f.runs.baseline, summary=f.summary, params=f.params,
                     prompt=f.prompt, prompt_ids=f.prompt_ids, family=f.family)


def dumps(result: RunResult) -> str:
    """The run as JSON text that is valid UTF-8: a lone surrogate (which no UTF-8 file can hold,
    and which the reader refuses even escaped) is written as U+FFFD, so the rest is never lost."""
    text = json_text(result.to_json(), ensure_ascii=False, indent=1)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def save(result: RunResult, path: Path, exclusive: bool = False) -> Path:
    from decoders.records import atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise atomic.write_error(path, err, "the run") from None
    return atomic.write_text(path, dumps(result), what="the run", exclusive=exclusive)


def read_bounded(path: Path, available: int | None = None) -> bytes:
    """The file's bytes, if this machine can hold the run they make (`bounds.max_run_bytes`; a
    regular file's size is checked before any of it is read); DecodeError otherwise, worded as
    every bounded read's (`decoders.records.inputs.read_bytes`)."""
    from decoders.records.inputs import read_bytes

    bound = max_run_bytes(available)
    try:
        info = os.stat(path)
    except OSError:
        info = None  # read_bytes names what is wrong (missing, unreadable)
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > bound:
        raise DecodeError(size_refusal(path, info.st_size, bound, available))
    raw = read_bytes(path, "the saved run", bound + 1, "give the path of a RUN.json file written by tui-decode")
    if len(raw) > bound:
        raise DecodeError(size_refusal(path, None, bound, available))
    return raw


def _read_typed(raw: bytes, details: Iterable[type[Detail]] | None) -> RunResult | None:
    """A file of the current schema read in one typed pass (3x faster than plain JSON then
    converted, and without a plain copy of the whole run in memory); None when it is of another
    schema or does not decode (the plain path then migrates it, or names what is wrong)."""
    try:
        if msgspec.json.decode(raw, type=_Schema).schema != SCHEMA_VERSION:
            return None
        f = msgspec.json.decode(raw, type=_RunFileRead[detail_union(details)])  # type: ignore[index,misc]
        summary = msgspec.json.decode(f.summary)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if not isinstance(summary, dict):
        return None
    return _checked(f, summary)


def load(path: Path, details: Iterable[type[Detail]] | None = None) -> RunResult:
    raw = read_bounded(path)
    if not raw.strip():
        raise DecodeError(f"{path} is empty, not a saved run; {HINT}")
    try:
        fast = _read_typed(raw, details)
    except DecodeError as exc:
        raise DecodeError(f"{path} is not a valid tui-decode run record: {exc}; {HINT}") from None
    if fast is not None:
        return fast
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


def _id_text(token: int) -> str:
    """How a token is shown when its text is not known: as `Family.display` shows an unknown id."""
    return f"<id {token}>"


def _text_holders(run: Run) -> Iterable[tuple[int, Any, Any]]:
    """(id, holder, key) of every token text ``run`` keeps: its token list, its iterations'
    emitted tokens and draft rows (``holder[key]`` or ``holder.key`` is the text)."""
    if run.tokens and len(run.tokens) == len(run.ids):
        for i, token in enumerate(run.ids):
            yield token, run.tokens, i
    for it in run.iters:
        for emitted in it.emit:
            yield emitted.token, emitted, "text"
        for row in it.draft:
            yield row.token, row, "text"


def _set_text(holder: Any, key: Any, text: str) -> None:
    if isinstance(key, int):
        holder[key] = text
    else:
        setattr(holder, key, text)


def _get_text(holder: Any, key: Any) -> str:
    return holder[key] if isinstance(key, int) else getattr(holder, key)


def token_texts_from_ids(result: RunResult, display: Callable[[int], str] | None = None,
                         decode: Callable[[list[int]], str] | None = None, decoder: str = "") -> str | None:
    """Make every token text ``result`` keeps (its runs' token lists, emitted tokens and draft rows)
    agree with its token ids, the ids being the record; None when they agreed, else one line
    saying what was changed. ``result`` is changed in place.

    With the tokenizer the run was made with (``display`` one id's text, as `Family.display`;
    ``decode`` the text of ids; ``decoder`` names it): every text is its id's, re-decoded. Without
    it, an id the file gives two texts (a hand-edited ``tokens``) shows as ``<id N>``: which text
    is right cannot be told, and neither is shown as the token's.
    """
    runs = (result.method, result.baseline)
    if display is not None:
        wrong: dict[int, str] = {}
        for run in runs:
            for token, holder, key in _text_holders(run):
                right = display(token)
                if _get_text(holder, key) != right:
                    wrong.setdefault(token, _get_text(holder, key))
                    _set_text(holder, key, right)
            if decode is not None and wrong:
                run.text = decode(list(run.ids))
        if not wrong:
            return None
        token, was = next(iter(wrong.items()))
        return (f"{len(wrong)} token id(s) had texts other than their own (id {token} read {was[:40]!r}, it is "
                f"{display(token)[:40]!r}): shown as {decoder or 'the tokenizer'} decodes the ids")
    texts: dict[int, list[str]] = {}
    for run in runs:
        for token, holder, key in _text_holders(run):
            seen = texts.setdefault(token, [])
            if _get_text(holder, key) not in seen:
                seen.append(_get_text(holder, key))
    torn = {token: seen for token, seen in texts.items() if len(seen) > 1}
    if not torn:
        return None
    for run in runs:
        for token, holder, key in _text_holders(run):
            if token in torn:
                _set_text(holder, key, _id_text(token))
    token, seen = next(iter(torn.items()))
    return (f"{len(torn)} token id(s) have two texts in the file (id {token}: {seen[0][:40]!r} and "
            f"{seen[1][:40]!r}): the ids are the record, so those tokens show as <id N>; load the model "
            "the run was made with and open it again to see them decoded")
