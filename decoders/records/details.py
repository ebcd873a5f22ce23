"""Iteration details: what one method's iteration records beyond its draft rows.

A detail kind is a msgspec Struct tagged by ``kind``, declared by the method module that records
it, next to the method::

    @register_detail
    class JacobiBlock(Detail, tag="jacobi"):
        before: list[list]
        ...

`register_detail` adds it to `DETAIL_KINDS`, this layer's own table. The records layer never
asks the method registry which methods exist, and imports no method module: a saved run is read
against the kinds registered when it is read (`detail_union`), or those its caller passes. Whoever
opens saved runs imports the method modules first (the app and the engine do, through the
registry); a kind nobody registered is refused in one line naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Union

import msgspec

from decoders.records.bounds import PerStep
from decoders.records.rows import TopEntry


class Detail(msgspec.Struct, tag_field="kind"):
    """Base of the detail kinds; saved as ``{"kind": ..., **fields}``."""

    kind: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


DETAIL_KINDS: dict[str, type[Detail]] = {}


def register_detail(cls: type[Detail]) -> type[Detail]:
    """Class decorator: make ``cls`` (a `Detail` with a ``tag``) loadable from saved runs."""
    if not (isinstance(cls, type) and issubclass(cls, Detail)):
        raise TypeError(f"{cls!r} is not a Detail Struct; declare `class X(Detail, tag=\"kind\")`")
    tag = cls.__struct_config__.tag
    if not isinstance(tag, str) or not tag:
        raise ValueError(f"{cls.__name__} needs a kind: declare it as `class {cls.__name__}(Detail, tag=\"...\")`")
    cls.kind = tag
    DETAIL_KINDS[tag] = cls
    return cls


def detail_union(details: Iterable[type[Detail]] | None = None) -> Any:
    """The tagged union a saved detail is decoded as: ``details``, or every kind registered so far."""
    kinds = tuple(DETAIL_KINDS.values() if details is None else details)
    return Union[kinds]  # noqa: UP007 (a runtime union of a tuple of types)


@register_detail
class TopK(Detail, tag="topk"):
    """The top-k of the target's p at each draft position and after the last (the bonus
    position), and of the helper's q at each draft position."""

    p: Annotated[list[Annotated[list[TopEntry], PerStep]], PerStep]
    q: Annotated[list[Annotated[list[TopEntry], PerStep]], PerStep]
