"""Iteration detail views, one module per detail kind, picked by the iteration's detail kind.

A method that records a new kind of detail adds one module here: a function decorated with
``@register_view("<kind>")``. Every module of this package is imported below, so the view is
found without further wiring.
"""

from __future__ import annotations

import importlib
import pkgutil

from tui_decode.widgets.details.base import (
    PLAIN,
    DetailContext,
    DetailView,
    StyleOf,
    register_view,
    view_for,
    view_kinds,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["PLAIN", "DetailContext", "DetailView", "StyleOf", "register_view", "view_for", "view_kinds"]
