"""report.json as declared records: reports written before the records were msgspec Structs
(tests/data/report_*.json) load and write back byte for byte, and a damaged one is refused in one
line naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decoders.bench.report import load_report, render_markdown
from decoders.core.errors import DecodeError

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("name,kind", [("report_bench.json", "bench"), ("report_sweep.json", "sweep")])
def test_a_report_written_before_loads_and_writes_back_the_same(name, kind):
    saved = DATA / name
    report = load_report(saved)
    assert report.kind == kind
    assert report.to_json() == json.loads(saved.read_text())
    assert json.dumps(report.to_json(), ensure_ascii=False, indent=1) == saved.read_text()
    assert render_markdown(report).startswith("# tui-decode bench")


def damage(tmp_path, name, change):
    data = json.loads((DATA / name).read_text())
    change(data)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DecodeError) as err:
        load_report(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    return message


def test_a_damaged_report_names_the_field(tmp_path):
    def tokens(d):
        d["samples"][1]["ours"]["spec"]["tokens"] = "8"

    def wall(d):
        del d["samples"][0]["theirs"]["pld"]["wall_ms"]

    def acceptance(d):
        d["overall"]["spec"]["ours"]["acceptance"] = "high"

    def ids(d):
        d["samples"]["2"][1]["ids"] = [1, "a"]

    assert damage(tmp_path, "report_bench.json", tokens).endswith(
        "is not a valid bench report: samples[1].ours.spec.tokens must be an integer, got str")
    assert damage(tmp_path, "report_bench.json", wall).endswith("samples[0].theirs.pld has no wall_ms")
    assert damage(tmp_path, "report_bench.json", acceptance).endswith(
        "overall.spec.ours.acceptance must be a number or null, got str")
    assert damage(tmp_path, "report_sweep.json", ids).endswith("samples.2[1].ids[1] must be an integer, got str")
    assert "not a bench report of schema 1" in damage(tmp_path, "report_bench.json", lambda d: d.pop("schema"))
