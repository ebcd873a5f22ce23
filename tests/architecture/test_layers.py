"""The architecture's rules, checked on every test run: which layer may import which, where torch
and Textual may load, and that ruff and mypy pass.

Each source module's imports are read from its syntax tree (nothing is imported), so a forbidden
import fails here even on a path no other test runs. An import inside ``if TYPE_CHECKING:`` is
an annotation, not a dependency, and is not counted; an import inside a function is counted for
the "never" rules (it still runs) but not for the layer order (it is how a lower layer reaches a
heavy library, or a plugin, only when asked).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The engine's layers, bottom up: a module may import, at module level, its own layer and those
#: below it. Models and backends sit side by side (a family picks its backend when it loads).
DECODER_LAYERS = {
    "decoders.core": 0, "decoders.records": 1, "decoders.analysis": 2,
    "decoders.models": 3, "decoders.backends": 3,
    "decoders.methods": 4, "decoders.engine": 5, "decoders.bench": 6, "decoders.training": 6,
}
#: The app's layers, bottom up (the engine is below all of them).
APP_LAYERS = {
    "tui_decode.state": 0, "tui_decode.widgets": 1, "tui_decode.workers": 2,
    "tui_decode.screens": 3, "tui_decode.app": 4, "tui_decode.cli": 5,
}
#: Layers whose modules import no torch (nor transformers) when they are imported.
NO_TORCH_AT_IMPORT = ("decoders.core", "decoders.records", "decoders.analysis", "decoders.methods",
                      "decoders.models", "decoders.engine", "decoders.bench", "decoders.training",
                      "tui_decode")
HEAVY = ("torch", "transformers")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. "decoders.core.params"
    target: str  # what it imports, e.g. "decoders.core.declarations"
    line: int
    top_level: bool  # at module level (not inside a function)

    def __str__(self) -> str:
        where = "at import" if self.top_level else "inside a function"
        return f"{self.module}:{self.line} imports {self.target} ({where})"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(path: Path, module: str | None = None) -> list[Import]:
    """Every import in ``path`` outside ``if TYPE_CHECKING:``, with whether it runs at import."""
    module = module or module_name(path)
    found: list[Import] = []

    def visit(node: ast.AST, top_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, top_level)
                continue
            if isinstance(child, ast.Import):
                found.extend(Import(module, alias.name, child.lineno, top_level) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.append(Import(module, child.module, child.lineno, top_level))
                # `from decoders import methods` imports the submodule decoders.methods
                found.extend(Import(module, f"{child.module}.{alias.name}", child.lineno, top_level)
                             for alias in child.names if child.module in ("decoders", "tui_decode"))
            inner = top_level and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, inner)

    visit(ast.parse(path.read_text(), filename=str(path)), True)
    return found


def all_imports(package: str) -> list[Import]:
    return [imp for path in sorted((ROOT / package).rglob("*.py")) for imp in imports_of(path)]


def layer_of(name: str, layers: dict[str, int]) -> int | None:
    best = max((key for key in layers if name == key or name.startswith(key + ".")), key=len, default=None)
    return None if best is None else layers[best]


def under(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_the_engine_never_imports_textual_or_the_app():
    bad = [str(i) for i in all_imports("decoders") if under(i.target, "textual", "tui_decode", "rich.live")]
    assert bad == [], "decoders/ must not import the UI:\n" + "\n".join(bad)


@pytest.mark.parametrize("package,layers", [("decoders", DECODER_LAYERS), ("tui_decode", APP_LAYERS)])
def test_each_layer_imports_only_the_layers_below_it_at_import(package, layers):
    bad = []
    for imp in all_imports(package):
        own, other = layer_of(imp.module, layers), layer_of(imp.target, layers)
        if imp.top_level and own is not None and other is not None and other > own:
            bad.append(f"{imp}: layer {other} above layer {own}")
    assert bad == [], "an import points up the layers:\n" + "\n".join(bad)


def test_torch_loads_only_in_the_backends_at_import():
    bad = [str(i) for pkg in ("decoders", "tui_decode") for i in all_imports(pkg)
           if i.top_level and under(i.target, *HEAVY) and under(i.module, *NO_TORCH_AT_IMPORT)]
    assert bad == [], "torch or transformers imported at module level outside decoders.backends:\n" + "\n".join(bad)


def test_widgets_and_state_never_import_torch_or_the_workers():
    bad = [str(i) for i in all_imports("tui_decode")
           if under(i.module, "tui_decode.widgets", "tui_decode.state")
           and under(i.target, *HEAVY, "decoders.backends", "tui_decode.workers", "tui_decode.screens")]
    bad += [str(i) for i in all_imports("tui_decode/state") if under(i.target, "textual")]
    assert bad == [], "widgets and state stay free of torch, workers and screens (state of Textual too):\n" + \
        "\n".join(bad)


def test_the_checker_sees_a_forbidden_import(tmp_path):
    """The checker itself: an `import textual` and a module-level torch import in a core module
    are both found (so the tests above can fail)."""
    fake = tmp_path / "probe.py"
    fake.write_text("import torch\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import numpy\n\n\n"
                    "def f():\n    import textual\n")
    found = [(i.target, i.top_level) for i in imports_of(fake, "decoders.core.probe")]
    assert found == [("torch", True), ("typing", True), ("textual", False)]
    assert layer_of("decoders.methods.shared.verify", DECODER_LAYERS) == 4


def test_importing_the_lower_layers_loads_no_torch_and_no_textual():
    code = ("import sys, decoders, decoders.core.params, decoders.records.run, decoders.analysis.summary, "
            "decoders.models.family, decoders.engine, decoders.bench, tui_decode.state.settings, "
            "tui_decode.cli.main; "
            "print(sorted(m for m in ('torch', 'transformers', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_ruff_passes():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                          "decoders", "tui_decode", "tests", "scripts"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_passes(mypy_result):
    """mypy over decoders/ and tui_decode/ with check_untyped_defs (config in pyproject.toml). It
    starts in the background when the suite is collected (tests/architecture/conftest.py), so it costs the suite almost nothing."""
    code, output = mypy_result()
    assert code == 0, output
