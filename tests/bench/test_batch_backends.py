"""The batch bench on several backends in one run (`tui-decode bench --batch 1,2 --backends
torch,llamacpp`, `decoders.bench.batch_multi`): one report with each backend's surface T(B, k),
every row labelled by its backend and beside autoregressive decoding at the same batch size on the
same backend, the crossover and the identity check per backend, a row a backend cannot batch left
out there in one line, and the backends' batch-1 outputs compared; a batch report written before
runs on several (by the code at 08aeea5, tests/data/report_batch.json and .md) still opens and
renders as it did.

The bookkeeping tests run two lanes of tiny torch models under the two backends' keys (seconds);
the end-to-end one runs the bundled GGUF on torch and llama.cpp (marked model). No timing
assertions: only which figure comes from which runs.
"""

from __future__ import annotations

import json
from functools import partial

import pytest

from decoders.bench.batch_multi import run_batch_backends
from decoders.bench.batch_report import render_markdown
from decoders.bench.files import load_report, report_from_json
from decoders.models.drafts import HelperModel
from tests.support.app import DATA
from tests.support.engine import peaked_model, tiny_family
from tests.support.tiny import perturbed_copy

PROMPTS = [[5, 6, 7, 8, 5, 6, 7], [9, 10, 11, 9, 10, 11, 9], [12, 13, 12, 13, 12], [20, 21, 22, 20, 21]]
UNLOADED = "A trained head reads the target's hidden states, which the llama.cpp backend does not expose"


def with_helper(family):
    """``family`` drafting with its helper model at batch B (`decoders.bench.batch_spec`)."""
    family.draft = HelperModel(source="tiny+noise")
    family.helper_model = family.helper.model
    return family


def other_model(family):
    """``family`` with another main model (its outputs part from the first's somewhere)."""
    family.main_model = perturbed_copy(peaked_model(), 0.6, seed=3)
    family.main.model = family.main_model
    return family


@pytest.fixture(scope="module")
def report():
    families = {"torch": with_helper(tiny_family(False)), "llamacpp": other_model(tiny_family(False))}
    prompts = {backend: PROMPTS for backend in families}
    return run_batch_backends(families, prompts, [1, 2], ["ar", "pld", "spec"], 6, rounds=2, k=3,
                              surface_repeats=1, surface_widths=3, unloaded={"llamacpp": UNLOADED},
                              questions=[(i, "writing") for i in range(len(PROMPTS))])


def test_one_report_holds_each_backends_surface_and_rows(report):
    assert report.settings.backends == ["torch", "llamacpp"]
    assert list(report.sides) == ["torch", "llamacpp"]
    for side in report.sides.values():
        assert sorted(side.surface) == ["1", "2"] and side.surface["1"][0] == 1.0 and len(side.surface["2"]) == 3
        assert side.surface_unit_ms > 0
    assert report.surface == report.sides["torch"].surface  # a one-backend reader finds the first's
    assert report.sides["torch"].methods == ["ar [torch]", "pld [torch]", "spec [torch]"]
    assert report.sides["llamacpp"].methods == ["ar [llama.cpp]", "pld [llama.cpp]"]
    assert report.settings.methods == ["ar [torch]", "pld [torch]", "spec [torch]", "ar [llama.cpp]",
                                       "pld [llama.cpp]"]
    # each batch size: the first backend's rows, then the second's
    assert [(r.method, r.batch) for r in report.rows] == [
        (m, b) for b in (1, 2) for m in ("ar [torch]", "pld [torch]", "spec [torch]", "ar [llama.cpp]",
                                         "pld [llama.cpp]")]
    assert [r.backend for r in report.rows[:5]] == ["torch"] * 3 + ["llamacpp"] * 2
    assert set(report.crossover) == {"pld [torch]", "spec [torch]", "pld [llama.cpp]"}


def test_each_row_is_beside_ar_at_its_batch_size_on_its_own_backend(report):
    ar = {(r.backend, r.batch): r.throughput for r in report.rows if r.method.startswith("ar ")}
    assert len(set(ar.values())) == 4  # four AR runs, none shared
    for r in report.rows:
        assert r.ar_throughput == ar[(r.backend, r.batch)], r.method
    assert all(r.identical for r in report.rows) and report.divergences == []


def test_a_row_a_backend_cannot_batch_is_left_out_there_in_one_line(report):
    assert report.sides["torch"].left_out == []
    assert report.sides["llamacpp"].left_out == [f"spec [llama.cpp] left out: {UNLOADED}"]
    text = render_markdown(report)
    assert f"\n- spec [llama.cpp] left out: {UNLOADED}\n" in text
    assert "| spec [torch] | 2 |" in text and "| spec [llama.cpp]" not in text


def test_the_backends_batch_1_outputs_are_compared_with_their_margins(report):
    assert [a.question_id for a in report.agreements] == [0, 1, 2, 3]  # every prompt the rounds decoded
    assert all(a.backends == ["torch", "llamacpp"] for a in report.agreements)
    parted = [a for a in report.agreements if not a.identical]
    assert parted, "the two models' outputs part somewhere"
    for a in parted:
        assert a.first_divergence is not None and len(a.margin) == 2 and all(m is not None for m in a.margin)
        assert a.top2[0][0] == a.chosen[0]  # the first side chose its own top-1
    assert "## Agreement between the backends' batch-1 AR outputs" in render_markdown(report)


def test_the_report_names_each_backend_and_reads_back(report, tmp_path):
    from decoders.bench.batch_report import write_batch_report

    text = render_markdown(report)
    assert "### T(B, k) on torch" in text and "### T(B, k) on llama.cpp" in text
    assert text.index("### T(B, k) on torch") < text.index("### T(B, k) on llama.cpp") < text.index("## Speedup")
    assert "- torch: every sequence equals its batch-1 output on torch" in text
    assert "- llama.cpp: every sequence equals its batch-1 output on llama.cpp" in text
    md, js = write_batch_report(report, tmp_path)
    back = load_report(js)
    assert back == report and render_markdown(back) == md.read_text()


def test_a_batch_report_from_before_several_backends_still_opens_and_renders_as_it_did():
    old = json.loads((DATA / "report_batch.json").read_text())
    assert "backends" not in old and "backends" not in old["settings"]
    report = load_report(DATA / "report_batch.json")
    assert report.kind == "batch" and report.sides == {} and report.agreements == []
    assert render_markdown(report) == (DATA / "report_batch.md").read_text()
    # written back, it is the file it was (no key of runs on several added)
    assert report.to_json() == old
    assert report_from_json(report.to_json()) == report


@pytest.mark.model  # the bundled GGUF on both backends
def test_the_batch_bench_runs_on_both_backends_from_the_command_line(tmp_path, capsys, monkeypatch):
    pytest.importorskip("llama_cpp")
    import decoders.bench.batch_multi as multi
    from tui_decode.cli.main import main as cli_main

    # time, not bookkeeping: two widths of each surface, timed once
    monkeypatch.setattr(multi, "run_batch_backends", partial(multi.run_batch_backends, surface_widths=2,
                                                             surface_repeats=1))
    path = tmp_path / "p.jsonl"
    turns = ["Say this twice: red fox, blue fox. red fox, blue fox.", "What is the capital of France?"]
    path.write_text("\n".join(json.dumps({"question_id": i, "category": "qa", "turns": [t]}) for i, t in enumerate(turns)))
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(path), "--main", "bundled", "--self-draft", "int4",
                     "--backends", "torch,llamacpp", "--batch", "1,2", "--methods", "ar,pld,spec",
                     "--max-new-tokens", "4", "--num-pred", "3", "--threads", "1", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    assert data["kind"] == "batch" and data["settings"]["backends"] == ["torch", "llamacpp"]
    assert data["backends"]["llamacpp"]["family"]["backend"] == "llamacpp"
    assert "backend" not in data["backends"]["torch"]["family"]
    for side in data["backends"].values():
        assert sorted(side["surface"]) == ["1", "2"] and side["surface"]["1"][0] == 1.0
    assert [(r["method"], r["batch"]) for r in data["rows"]] == [
        (m, b) for b in (1, 2) for m in ("ar [torch]", "pld [torch]", "spec [torch]", "ar [llama.cpp]",
                                         "pld [llama.cpp]")]
    assert all(r["identical"] for r in data["rows"]), data["divergences"]
    # the int4 self-draft is packed from torch's weights: spec is left out on llama.cpp, saying why
    assert data["backends"]["llamacpp"]["left_out"] == [
        "spec [llama.cpp] left out: An int4 self-draft is packed from the torch model's weights, which the llama.cpp "
        "backend does not expose; use --backend torch, or draft with a GGUF helper (--helper FILE.gguf)."]
    assert [a["question_id"] for a in data["agreement"]] == [0, 1]
    assert "### T(B, k) on llama.cpp" in printed and "| pld [llama.cpp] | 2 |" in printed
    assert "- spec [llama.cpp] left out: An int4 self-draft" in printed
    assert load_report(out / "report.json").sides["llamacpp"].label == "llama.cpp"


def test_a_row_no_backend_can_batch_is_one_line():
    from decoders.core.errors import DecodeError

    families = {"torch": tiny_family(False), "llamacpp": tiny_family(False)}
    with pytest.raises(DecodeError) as err:
        run_batch_backends(families, {b: PROMPTS for b in families}, [1], ["ar", "spec"], 4, surface_repeats=1,
                           surface_widths=2, unloaded={"llamacpp": UNLOADED})
    assert str(err.value) == ("no backend can run spec at batch > 1: speculative decoding at batch > 1 needs a draft: "
                              "load a helper model with --helper SRC or draft with --self-draft int4 or --self-draft "
                              "head")
