"""The sweep's saved files say what its screen says: the swept parameter by the name the screen's
table shows (k, γ; not num_pred, gamma), and the method as the sweep ran it (the draft policy
fixed, as the title says), not as the settings beneath it read (adaptive). No app runs here."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from decoders.core.params import DecodeParams
from decoders.records.summary import Summary
from tui_decode.screens.sweep import RepeatScreen, SweepScreen
from tui_decode.state.settings import Settings


def screen(cls, method: str, key: str, axis: str, values: list[int]) -> SweepScreen:
    host = SimpleNamespace(_decode_lock=threading.Lock())
    loaded = SimpleNamespace(engine=SimpleNamespace(family=SimpleNamespace(label="Tiny")))
    settings = Settings(params=DecodeParams(method=method, draft_policy="adaptive"))
    sweep = cls(host, loaded, "Say hi.", settings, key, values, axis)
    from tui_decode.screens.sweep import Measured

    sweep.points = [Measured(v, Summary(method=method, tokens=8, speedup_decode=1.0 + v / 100, speedup_spread=0.05))
                    for v in values]
    return sweep


@pytest.mark.parametrize(("method", "key", "axis", "policy_word"), [("pld", "num_pred", "k", "fixed"),
                                                                     ("spec", "gamma", "γ", "γ=")])
def test_the_sweep_file_names_the_parameter_and_the_policy_as_the_screen_does(method, key, axis, policy_word):
    sweep = screen(SweepScreen, method, key, axis, [10, 7, 8, 9])
    markdown, csv = sweep.export()
    title = sweep.heading_text()
    assert title.startswith(f"Sweep of {axis} = 7, 8, 9, 10") and title.endswith("draft policy fixed")
    assert markdown.startswith(f"# {title}\n")
    assert f"| {axis} | speedup |" in markdown and key not in markdown
    assert csv.splitlines()[0].startswith(f"{axis},speedup,spread,verdict") and key not in csv
    method_line = next(line for line in markdown.splitlines() if line.startswith("- method: "))
    assert "adaptive" not in method_line and policy_word in method_line, method_line
    assert f"at {axis}=10; each row sets {axis} to its value" in method_line


def test_the_repeat_file_names_the_method_as_its_runs_ran():
    repeat = screen(RepeatScreen, "pld", "run", "run", [1, 2, 3])
    markdown, _ = repeat.export()
    method_line = next(line for line in markdown.splitlines() if line.startswith("- method: "))
    assert method_line == "- method: Prompt lookup (n=1..3, k≤10, adaptive)"  # r runs the settings as they are
