"""Shared fixtures. The bundled model is loaded once per session; its converted copy stays in the
user cache (or $TUI_DECODE_CACHE_DIR) so only the very first test run pays the GGUF conversion."""

from __future__ import annotations

import inspect
from dataclasses import replace
from pathlib import Path

import pytest

from decoders.models.drafts import Int4
from tests.support.threads import torch_threads


@pytest.fixture
def one_torch_thread(request):
    """Torch's CPU threads at 1 for the test, restored after it (`tests.support.threads`). The
    folders whose tests run torch (engine, backends, models, bench) use it for every test, and a
    module fixture that decodes uses `torch_threads(1)` itself (it is set up before this one);
    the app's and the CLI's tests (which test `--threads`) do not, nor do the bundled model's
    (its matmuls do use the second core)."""
    if "smollm2" in request.fixturenames:
        yield
        return
    with torch_threads(1):
        yield


@pytest.fixture(scope="session", autouse=True)
def _features_in_a_temporary_folder(tmp_path_factory):
    """`train-head` keeps extracted features in the user cache; the tests' tiny models keep theirs
    in a folder of this test session (a subprocess of a test gets TUI_DECODE_CACHE_DIR itself)."""
    import decoders.training.feature_cache as feature_cache

    folder = tmp_path_factory.mktemp("features")
    real = feature_cache.features_root
    feature_cache.features_root = lambda: folder
    yield
    feature_cache.features_root = real


@pytest.fixture(scope="session")
def _calibration_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("calibration")


@pytest.fixture(autouse=True)
def calibration_file(_calibration_folder, request, monkeypatch):
    """The run-to-run noise calibration is kept in the user cache; each test keeps its own in a
    file of its own (none at first), so a developer's calibration, or another test's, never
    widens a tested spread."""
    import decoders.models.machine as machine

    path = _calibration_folder / f"{abs(hash(request.node.nodeid)):x}.json"
    monkeypatch.setattr(machine, "calibration_path", lambda: path)
    return path


@pytest.fixture(scope="session")
def _choices_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("choices")


@pytest.fixture(autouse=True)
def _kept_choices_per_test(_choices_folder, request):
    """A family that chooses its dtype or draft ("fastest") keeps the choice in the user cache
    (`decoders.models.kept_choice`); each test keeps its own in a folder of this test session, so
    that no test reuses another's choice or the user's (a subprocess gets TUI_DECODE_CACHE_DIR)."""
    import hashlib

    import decoders.models.kept_choice as kept_choice

    folder = _choices_folder / hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:16]
    # a patch of its own: a test's `monkeypatch.undo()` must not send its choices to the user's cache
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kept_choice, "choices_root", lambda: folder)
        yield


@pytest.fixture(scope="session", autouse=True)
def _stay_in_process():
    """`run_app` leaves with os._exit after the app (a fast quit); called in-process by the tests
    (`main(["--open", ...])`), that would end pytest itself, silently, mid-run; and the app refuses
    to start without a terminal (`tui_decode.cli.terminal`), which pytest's streams are not. A child
    process of a test (the ctrl+q timing test, the no-terminal test) keeps the real behaviour."""
    import tui_decode.app
    import tui_decode.cli.terminal

    tui_decode.app.LEAVE_AT_ONCE = False
    tui_decode.cli.terminal.NEEDS_TERMINAL = False  # pytest's captured streams are no terminals
    yield
    tui_decode.app.LEAVE_AT_ONCE = True
    tui_decode.cli.terminal.NEEDS_TERMINAL = True


@pytest.fixture(scope="session")
def smollm2():
    """The bundled SmolLM2-135M family on CPU in float32 (reproducible numerics on any machine),
    from the built-in definition so a user's families.toml cannot change what tests run."""
    from decoders.models.families import BUILTIN_FAMILIES
    from decoders.models.family import load_family

    # the int4 self-draft pinned: the default ("fastest") chooses by timing this machine
    return load_family(replace(BUILTIN_FAMILIES["smollm2-135m"], device="cpu", dtype="float32", draft=Int4()))


@pytest.fixture(scope="session")
def q4_0_helper_gguf(tmp_path_factory):
    """The bundled GGUF requantised to Q4_0 (`tests.support.quantized_gguf`): a llama.cpp helper
    accepted in part. Skipped where llama_cpp is missing."""
    pytest.importorskip("llama_cpp")
    from decoders.models.bundled import bundled_gguf_path
    from tests.support.quantized_gguf import quantized_copy

    return quantized_copy(bundled_gguf_path(), tmp_path_factory.mktemp("gguf") / "smollm2-q4_0.gguf")


APP_TESTS = Path(__file__).parent / "app"


def drives_the_app(item) -> bool:
    """Whether a test starts the whole app through Textual's Pilot (a coroutine test or a snapshot
    under tests/app): a second or more each, whatever the model (the widget tests elsewhere that
    mount one widget in a small app take a fraction of that)."""
    function = getattr(item, "function", None)
    return Path(item.path).is_relative_to(APP_TESTS) and (
        "snap_compare" in getattr(item, "fixturenames", ()) or inspect.iscoroutinefunction(function))


def pytest_collection_modifyitems(config, items):
    """Every test that loads the bundled model (through the `smollm2` fixture, or a fixture built
    on it) is marked `model`; every test that drives the whole app is marked `slow`, as are those
    marked by hand (subprocesses, whole benchmark runs, statistics over thousands of runs). So
    ``pytest -m "not model and not slow"`` is the fast tier."""
    for item in items:
        if "smollm2" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.model)
        if drives_the_app(item):
            item.add_marker(pytest.mark.slow)
