"""tui-decode's decoding engine: model families, a KV-cached runner, parallel decoding methods and
their run records. It never imports Textual; the app holds an engine, never the reverse.

The layers, bottom up (each imports only those below it; `tests/architecture` checks it):
``core`` (errors, events, method and parameter declarations) -> ``records`` (runs in memory and
on disk) -> ``analysis`` (figures) -> ``models`` (families and their sources) and ``backends``
(torch) -> ``methods`` -> ``engine`` -> ``bench``. Importing the package registers the built-in
methods (`decoders.methods`); torch and transformers load only when a model does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The registry's entries: every method module, listed in `decoders.methods` (no torch at import).
from decoders import methods as _methods  # noqa: E402, F401

#: Public names and the module each lives in, imported when first asked for.
_PUBLIC = {
    "DecodeError": "decoders.core.errors",
    "Method": "decoders.core.declarations", "ParamSpec": "decoders.core.declarations",
    "Figure": "decoders.core.declarations", "register": "decoders.core.declarations",
    "get_method": "decoders.core.declarations", "all_methods": "decoders.core.declarations",
    "DecodeParams": "decoders.core.params",
    "Run": "decoders.records.run", "RunResult": "decoders.records.run", "Iteration": "decoders.records.run",
    "Summary": "decoders.records.summary",
    "FamilySpec": "decoders.models.family", "Family": "decoders.models.family",
    "load_family": "decoders.models.family",
    "Engine": "decoders.engine",
}

if TYPE_CHECKING:
    from decoders.core.declarations import Figure, Method, ParamSpec, all_methods, get_method, register
    from decoders.core.errors import DecodeError
    from decoders.core.params import DecodeParams
    from decoders.engine import Engine
    from decoders.models.family import Family, FamilySpec, load_family
    from decoders.records.run import Iteration, Run, RunResult
    from decoders.records.summary import Summary

__all__ = [
    "__version__", "DecodeError", "Method", "ParamSpec", "Figure", "register", "get_method", "all_methods",
    "DecodeParams", "Run", "RunResult", "Iteration", "Summary", "FamilySpec", "Family", "load_family", "Engine",
]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'decoders' has no attribute {name!r}")
