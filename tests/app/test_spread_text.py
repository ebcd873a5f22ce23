"""Spreads print at the precision they need: a spread under 0.005 printed as "+/- 0.00" (as if
there were no uncertainty at all) in the statistics pane, the status line, the history, the
comparison, the sweep table and the headless table. No terminal needed."""

from __future__ import annotations

import pytest

from decoders.analysis.spread_text import spread_number, spread_places, value_with_spread
from decoders.records.run import RunResult
from decoders.records.summary import Summary
from tests.support.app import DATA
from tui_decode.state.exports import stream_figures
from tui_decode.state.run_history import RunHistory, Stream, speedup_text
from tui_decode.state.run_summary import summary_rows
from tui_decode.widgets.stats_pane import speed_text


@pytest.mark.parametrize("spread, places, shown", [
    (0.33, 2, "0.33"), (0.04, 2, "0.04"), (0.005, 2, "0.01"), (0.0049, 3, "0.005"), (0.004, 3, "0.004"),
    (0.0005, 3, "0.001"), (0.0004, 3, "< 0.001"), (1e-9, 3, "< 0.001")])
def test_a_spread_prints_with_the_places_it_needs(spread, places, shown):
    assert spread_places(spread) == places and spread_number(spread) == shown
    assert "0.00" != spread_number(spread) and "0.000" != spread_number(spread)


def test_a_speedup_takes_the_places_of_its_spread():
    assert value_with_spread(1.3512, 0.04) == "1.35x +/- 0.04"
    assert value_with_spread(1.0031, 0.004) == "1.003x +/- 0.004"
    assert value_with_spread(1.0002, 0.0001, sign="±") == "1.000x ± < 0.001"
    assert value_with_spread(1.2, None) == "1.20x"


def test_no_surface_prints_a_spread_of_0_00():
    assert speed_text(1.0031, 0.004) == ("no measurable difference (1.003x +/- 0.004)", "even")
    assert speed_text(1.0203, 0.004) == ("1.020x +/- 0.004 faster", "faster")
    assert speed_text(0.9795, 0.0004) == ("1.021x slower (0.980x +/- < 0.001)", "slower")
    assert speed_text(1.35, 0.04) == ("1.35x +/- 0.04 faster", "faster")  # as before
    result = RunResult.load(DATA / "run_spec.json")
    result.summary.speedup_decode, result.summary.speedup_spread = 1.0203, 0.004
    entry = RunHistory().record(result)
    assert speedup_text(result) == "1.020x ±0.004"
    assert dict(stream_figures(Stream(entry, "method")))["decode speedup"] == "1.020x ± 0.004"
    rows = dict(summary_rows(Summary(method="ar", speedup_decode=1.0203, speedup_spread=0.004,
                                     speedup_wall=0.99, speedup_wall_spread=0.003)))
    assert rows["decode speedup vs autoregressive"] == "1.020x +/- 0.004"
    assert rows["end-to-end speedup (prefill included)"] == "0.990x +/- 0.003"
