"""One way to read a record: `convert` checks plain JSON values against a declared msgspec type
and turns msgspec's error into the project's one line naming the field.

msgspec says ``Expected `int`, got `str` - at `$.runs.method.iters[3].k```; `convert` says
``runs.method.iters[3].k must be an integer, got str``. `Record` gives every declared record the
same ``to_json`` / ``from_json`` pair (no class writes its own).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, TypeVar

import msgspec

from decoders.core.errors import DecodeError

T = TypeVar("T")

_WORDS = {"int": "an integer", "float": "a number", "str": "text", "bool": "true or false", "array": "a list",
          "object": "an object", "null": "null", "bytes": "bytes"}
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]+)`(?P<rest>.*?), got `?(?P<got>[^`]+?)`?$")
_JSON_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "array": list, "object": dict, "null": type(None)}


def field_path(exc: msgspec.ValidationError, data: Any = None, root: str = "") -> tuple[str, str]:
    """(where, what): msgspec's ``- at `$...``` as a dotted path (``root`` for ``$``) and the rest."""
    text = str(exc)
    what, sep, at = text.rpartition(" - at `")
    if not sep:
        return root, text
    path = at.rstrip("`")[1:]  # without the "$"
    if "[...]" in path and data is not None:
        path = _name_keys(path, data, what)
    path = path.lstrip(".")
    if root and path:
        path = f"{root}.{path}" if not path.startswith("[") else root + path
    return path or root, what


def _name_keys(path: str, data: Any, what: str) -> str:
    """msgspec writes a mapping's key as ``[...]``: name the first key under which the rest of the
    path leads to a value of the type the message says it got (the offending value in practice),
    to the value it calls invalid, or, for a missing field, to an object without it."""
    m = _EXPECTED.search(what)
    got = _JSON_TYPES.get(m.group("got")) if m else None
    missing = what.split("`")[1] if what.startswith("Object missing required field `") else None
    invalid = re.match(r"Invalid (?:enum )?value (?P<value>.+)$", what)
    parts = re.findall(r"\.\w+|\[\d+\]|\[\.\.\.\]", path)

    def walk(node: Any, rest: list[str]) -> str | None:
        if not rest:
            if missing is not None:
                return "" if isinstance(node, dict) and missing not in node else None
            if invalid is not None:
                return "" if isinstance(node, (str, int)) and repr(node) == invalid.group("value") else None
            return "" if got is not None and type(node) is got else None
        part, tail = rest[0], rest[1:]
        if part == "[...]" and isinstance(node, dict):
            for key, value in node.items():
                found = walk(value, tail)
                if found is not None:
                    return f".{key}{found}"
            return None
        if part.startswith("[") and isinstance(node, list):
            i = int(part[1:-1])
            found = walk(node[i], tail) if i < len(node) else None
            return None if found is None else part + found
        if part.startswith(".") and isinstance(node, dict) and part[1:] in node:
            found = walk(node[part[1:]], tail)
            return None if found is None else part + found
        return None

    return walk(data, parts) or path


def one_line(exc: msgspec.ValidationError, data: Any = None, root: str = "the record") -> str:
    """``where must be <type>, got <type>`` (or ``where has no <field>``, ...): one line."""
    where, what = field_path(exc, data)
    where = where or root
    if what.startswith("Object missing required field `"):
        return f"{where} has no {what.split('`')[1]}"
    if what.startswith(("Invalid enum value ", "Invalid value ")):
        value = what.split(" value ", 1)[1]
        if where.endswith(".kind"):
            return f"{where[:-5]} has an unknown kind {value}"
        return f"{where} has an invalid value {value}"
    m = _EXPECTED.match(what)
    if m:
        want = " or ".join(_WORDS.get(w.strip(), w.strip()) for w in m.group("want").split("|"))
        rest = m.group("rest").strip()
        length = re.search(r"(at least |at most )?length (\d+)", rest)
        if length:
            want += f" of {length.group(1) or ''}{length.group(2)} items"
        return f"{where} must be {want}, got {m.group('got')}"
    if what.startswith("Expected `str` matching regex"):  # the declared NO_CONTROL (records.bounds)
        return f"{where} holds a control character (a terminal escape, say), which no run's text has"
    many = re.match(r"Expected `array` of length <= (?P<n>\d+)$", what)
    if many:  # a declared bound on a list: "runs.method.ids holds more than 131072 items"
        return f"{where} holds more than {many.group('n')} items"
    bound = re.match(r"Expected `(?P<want>[^`]+)` (?P<op>[<>]=?) (?P<n>\S+)$", what)
    if bound:  # a declared bound: "Expected `float` > 0.0"
        want = _WORDS.get(bound.group("want"), bound.group("want"))
        return f"{where} must be {want} {bound.group('op')} {bound.group('n')}"
    if what.startswith("."):  # a check of the record's own: ".kinds has 1 entries for 20 tokens"
        return f"{where}{what}"
    return f"{where}: {what}"


def convert(data: Any, type_: type[T] | Any, root: str = "the record") -> T:
    """``data`` (plain JSON values) as ``type_``, every field checked; DecodeError in one line.
    Object keys are JSON's strings: a ``dict[int, ...]`` reads them as integers."""
    try:
        return msgspec.convert(data, type_, str_keys=True)
    except msgspec.ValidationError as exc:
        raise DecodeError(one_line(exc, data, root)) from None


def json_text(data: Any, **kwargs: Any) -> str:
    """``json.dumps(data, **kwargs)``, but never NaN or Infinity, which JSON does not have (a reader
    refuses the whole file for one): a number that is not finite is written as null."""
    try:
        return json.dumps(data, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(_finite(data), allow_nan=False, **kwargs)


def _finite(plain: Any) -> Any:
    if isinstance(plain, float) and not math.isfinite(plain):
        return None
    if isinstance(plain, dict):
        return {k: _finite(v) for k, v in plain.items()}
    if isinstance(plain, (list, tuple)):
        return [_finite(v) for v in plain]
    return plain


def _lists(plain: Any) -> Any:
    """JSON's values: a tuple (msgspec keeps them) as the list that reading the JSON gives back."""
    if isinstance(plain, dict):
        return {k: _lists(v) for k, v in plain.items()}
    if isinstance(plain, (list, tuple)):
        return [_lists(v) for v in plain]
    return plain


class Record(msgspec.Struct):
    """A declared record: plain JSON out (``to_json``), checked JSON in (``from_json``)."""

    def to_json(self) -> Any:
        return _lists(msgspec.to_builtins(self, str_keys=True))

    @classmethod
    def from_json(cls: type[T], data: Any) -> T:
        return convert(data, cls, root=cls.__name__)
