"""Markdown for the generated reference pages (`scripts/gen_docs.py`): table cells, and a msgspec
record's table (each field's name, type as written, default and the comment beside it in the source).
"""

from __future__ import annotations

import ast
import inspect
import io
import textwrap
import tokenize
import types
import typing
from typing import Any

import msgspec


def cell(text: object) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: object) -> str:
    """Text as code in a table cell. A pipe cannot be escaped inside a code span the same way for GitHub and
    for mkdocs, so a type's ``A | B`` reads ``A or B``."""
    shown = " ".join(str(text).split()).replace(" | ", " or ").replace("|", " or ")
    return f"`{shown}`" if shown else ""


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _comments(cls: type) -> dict[str, str]:
    """Each field's comment in the class's source: the one ending its line, else the lines just above."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    trailing: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            trailing[token.start[0]] = token.string.lstrip("#").strip()
    tree = ast.parse(source).body[0]
    found: dict[str, str] = {}
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            line = node.end_lineno or node.lineno
            if line in trailing and not lines[line - 1].lstrip().startswith("#"):
                found[node.target.id] = trailing[line]
                continue
            above: list[str] = []
            n = node.lineno - 1
            while n >= 1 and lines[n - 1].lstrip().startswith("#"):
                above.insert(0, trailing.get(n, ""))
                n -= 1
            if above:
                found[node.target.id] = " ".join(above)
    return found


def written_annotations(cls: type) -> dict[str, str]:
    """Each field's annotation as written (``Ms | None``), from the class and its bases."""
    written: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            shown = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
            written[name] = shown
    return written


def _literals(annotation: Any) -> list[str]:
    """The values a field may take where its type lists them (a ``Literal``, or unions of them)."""
    if typing.get_origin(annotation) is typing.Literal:
        return [repr(value) for value in typing.get_args(annotation)]
    if typing.get_origin(annotation) is typing.Annotated:
        return _literals(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [value for arg in typing.get_args(annotation) for value in _literals(arg)]
    return []


def _type_text(cls: type, name: str, written: str) -> str:
    values = _literals(_hints(cls).get(name))
    shown = code(written)
    if values and "Literal" not in written:
        shown += " (" + ", ".join(f"`{value}`" for value in values) + ")"
    return shown


def _default_text(field: msgspec.structs.FieldInfo) -> str:
    if field.required:
        return "required"
    if field.default is not msgspec.NODEFAULT:
        default = field.default
        if default is msgspec.UNSET:
            return "left out"
        return code(repr(default))
    factory = field.default_factory
    if factory in (list, dict, set, tuple):
        return code(repr(factory()))
    return code(f"{getattr(factory, '__name__', 'a factory')}()")


def _is_struct(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, msgspec.Struct)


def _structs_in(annotation: Any) -> list[type]:
    if _is_struct(annotation):
        return [annotation]
    found: list[type] = []
    for arg in typing.get_args(annotation):
        found += _structs_in(arg)
    origin = typing.get_origin(annotation)
    if _is_struct(origin):
        found.append(origin)
    return found


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    direct: type
    for direct in cls.__subclasses__():
        found += [direct, *_subclasses(direct)]
    return found


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # an annotation only a type checker can resolve: its nested records are left out
        return {}


def records(*roots: type, tagged: tuple[type, ...] = ()) -> list[Any]:
    """The records ``roots`` hold, each once, in the order they are met; for each of ``tagged``, its
    registered kinds (subclasses) too."""
    seen: list[Any] = []
    queue: list[Any] = list(roots)
    while queue:
        cls = queue.pop(0)
        cls = typing.get_origin(cls) or cls
        if cls in seen or not _is_struct(cls):
            continue
        seen.append(cls)
        if cls in tagged:
            queue += sorted(_subclasses(cls), key=lambda sub: (sub.__module__, sub.__qualname__))
        for name in cls.__struct_fields__:
            queue += _structs_in(_hints(cls).get(name))
    return seen


def record_section(cls: Any, level: str = "##", skip: tuple[str, ...] = (),
                   described: dict[str, str] | None = None) -> list[str]:
    """A record's table: each field's name, type as written, default and comment (else ``described``'s)."""
    config = cls.__struct_config__
    out = [f"{level} `{cls.__name__}`", "", f"`{cls.__module__}.{cls.__qualname__}`", ""]
    doc = inspect.getdoc(cls)
    if doc and cls.__doc__ and cls.__doc__ is not msgspec.Struct.__doc__:
        out += [" ".join(doc.split("\n\n")[0].split()), ""]
    if config.tag is not None and config.tag_field:
        out += [f"Tagged: `\"{config.tag_field}\": \"{config.tag}\"`.", ""]
    if config.array_like:
        out += ["Saved as a JSON array of these fields, in this order.", ""]
    comments, written = field_comments(cls), written_annotations(cls)
    rows = []
    for field in msgspec.structs.fields(cls):
        if field.name in skip:
            continue
        name = field.encode_name
        rows.append([f"`{name}`", _type_text(cls, field.name, written.get(field.name, "")), _default_text(field),
                     cell(comments.get(field.name) or (described or {}).get(field.name, ""))])
    out += [table(["field", "type", "default", "what it holds"], rows), ""]
    return out


def field_comments(cls: type) -> dict[str, str]:
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if _is_struct(klass) and klass is not msgspec.Struct:
            found.update(_comments(klass))
    return found
