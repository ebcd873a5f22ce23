"""Issue 26: a figure that is not a number never shows as "nanx slower" or "infx", and never reaches
a JSON file as bare NaN or Infinity. A saved run's numbers are read within the range each can take
(`decoders.records.bounds`): a hand-edited 1e308 or 5e-324 is refused in one line naming the field,
where it overflowed to infinity in the arithmetic that shows it (a 309-digit number, a crash in
the acceptance bars or the iteration table)."""

from __future__ import annotations

import json
import math

import pytest

from decoders.core.errors import DecodeError
from decoders.records.run import RunResult
from tests.support.app import DATA


def edited(tmp_path, change):
    data = json.loads((DATA / "run_spec.json").read_text())
    change(data)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return path


def _all_drafts(d, column, value):
    for run in d["runs"].values():
        for it in run["iters"]:
            for row in it.get("draft", []):
                row[column] = value


@pytest.mark.parametrize("change,field", [
    (lambda d: d["summary"].__setitem__("speedup_decode", 1e-320), "summary.speedup_decode must be a number >= 1e-06"),
    (lambda d: d["summary"].__setitem__("speedup_wall", 1e308), "summary.speedup_wall must be a number <= 1000000.0"),
    (lambda d: d["summary"].__setitem__("tau", 1e308), "summary.tau must be a number <= 1000000.0"),
    (lambda d: d["summary"].__setitem__("tau", -1.0), "summary.tau must be a number >= 0.0"),
    (lambda d: d["summary"].__setitem__("tokens", 10**400), "summary.tokens must be an integer <= 1099511627776"),
    (lambda d: d["summary"].__setitem__("accept_rate", 2.0), "summary.accept_rate must be a number <= 1.001"),
    (lambda d: d["summary"].__setitem__("per_position_acceptance", [1e308]),
     "summary.per_position_acceptance[0] must be a number <= 1.001"),
    (lambda d: d["summary"].__setitem__("verify_cost_curve", [1e308] * 16), "summary.verify_cost_curve[0] must be"),
    (lambda d: d["summary"].__setitem__("alpha_hat", 1e308), "summary.alpha_hat is 1e+308"),
    (lambda d: d["summary"].__setitem__("c_hat", 5e-324), "summary.c_hat is 5e-324"),
    (lambda d: d["summary"].__setitem__("curve", [[1, 1e308]]), "summary.curve[0][1] is 1e+308"),
    (lambda d: d["summary"].__setitem__("gamma_star", 10**400), "summary.gamma_star is 1000"),
    (lambda d: d["runs"]["method"]["iters"][1].__setitem__("t_verify_ms", 1e308),
     "runs.method.iters[1].t_verify_ms must be a number <= 10000000000.0"),
    (lambda d: d["runs"]["method"]["iters"][1].__setitem__("t_draft_ms", -5.0),
     "runs.method.iters[1].t_draft_ms must be a number >= 0.0"),
    (lambda d: _all_drafts(d, 2, 1e308), "draft[0][2] must be a number <= 1.001"),
    (lambda d: _all_drafts(d, 0, -7), "draft[0][0] must be an integer >= 0"),
    (lambda d: d["runs"]["method"]["ids"].__setitem__(0, 2**70), "runs.method.ids[0] must be an integer <= 2147483647"),
    (lambda d: d["prompt_ids"].__setitem__(0, -1), "prompt_ids[0] must be an integer >= 0"),
])
def test_a_figure_out_of_its_range_is_refused_naming_the_field(tmp_path, change, field):
    with pytest.raises(DecodeError) as err:
        RunResult.load(edited(tmp_path, change))
    message = str(err.value)
    assert field in message and "\n" not in message, message


def test_every_saved_run_of_the_tests_still_loads():
    for path in sorted(DATA.glob("run_*.json")):
        RunResult.load(path)


def test_a_speedup_that_is_not_a_number_reads_n_a():
    from decoders.analysis.timing import ratio_text, verdict
    from decoders.core.declarations import Figure
    from tui_decode.widgets.stats_pane import speed_text

    for bad in (math.nan, math.inf, 0.0):
        assert speed_text(bad, 0.05) == ("n/a", "unknown")
        assert ratio_text(bad, 0.05) == "speedup over autoregressive n/a"
    assert speed_text(2.0, math.nan) == ("2.00x faster; spread not measured", "unknown")
    assert verdict(math.nan, 0.1) == "unknown"
    assert Figure("x", "x", "x").shown(math.nan) == "n/a" and Figure("x", "x", "x").shown(math.inf) == "n/a"


def test_a_run_whose_figures_are_nan_is_saved_as_json_and_reads_back(tmp_path):
    """NaN was written as bare ``NaN`` (Python's json), which no JSON reader takes: the run was lost."""
    result = RunResult.load(DATA / "run_spec.json")
    result.summary.speedup_spread = math.nan
    result.summary.extras["alpha_hat"] = math.inf
    path = result.save(tmp_path / "nan.json")

    def refuse(name):
        raise AssertionError(f"{name} written into the JSON")

    data = json.loads(path.read_text(), parse_constant=refuse)
    assert data["summary"]["speedup_spread"] is None and data["summary"]["alpha_hat"] is None
    again = RunResult.load(path)
    assert again.summary.speedup_spread is None and again.method.ids == result.method.ids


def test_a_bench_report_never_holds_nan(tmp_path):
    from decoders.bench.report import load_report, write_report

    report = load_report(DATA / "report_bench.json")
    report.prompts[0].question_id = math.nan
    _, js = write_report(report, tmp_path)
    json.loads(js.read_text(), parse_constant=lambda name: pytest.fail(f"{name} in report.json"))
    js.write_text(js.read_text().replace("null", "NaN", 1))
    with pytest.raises(DecodeError, match="it holds NaN, which is not a JSON number"):
        load_report(js)
