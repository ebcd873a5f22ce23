"""`tui-decode bench` end to end on a tiny random model: report files, fields, ratios that come
from the run's own timings, and one-line errors for bad input. No timing assertions: the
figures of a tiny model on a shared machine are noise, only their bookkeeping is checked."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from decoders.bench import (
    BenchPrompt,
    load_prompts,
    parse_methods,
    parse_sweep,
    select_prompts,
    task_group,
)
from decoders.core.errors import DecodeError
from decoders.models.drafts import HelperModel
from tests.support.threads import torch_threads
from tests.support.tiny import perturbed_copy, save_tiny_model, tiny_model
from tui_decode.cli.main import main

PROMPTS = [
    {"question_id": 81, "category": "writing", "turns": ["w5 w6 w7 w8 w5 w6 w7", "w9 second turn ignored"]},
    {"question_id": 481, "category": "rag", "turns": ["w9 w10 w11 w12 w9 w10 w11 w12 w9"]},
]
TINY_BENCH = ["--max-new-tokens", "8", "--bandwidth-mb", "64"]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return str(save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", layers=2))


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "two.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return str(path)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def bench_run(tiny_folder, prompts_file, tmp_path_factory):
    """One full bench run (all four methods, self-draft at layer 1 of 2) shared by the tests."""
    out_dir = tmp_path_factory.mktemp("bench-out")
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr), torch_threads(1):  # set up before the tests' one thread
        code = main(["bench", "--prompts", prompts_file, "--main", tiny_folder, "--self-draft-layer", "1",
                     "--methods", "ar,spec,pld,jacobi",  # the methods this test knows, not every registered one
                     "--draft-policy", "fixed",  # drafts decided by matches, not by timings of a loaded machine
                     "--record-overhead-every", "1", "--out", str(out_dir), *TINY_BENCH])
    report = json.loads((out_dir / "report.json").read_text())
    return {"code": code, "out": stdout.getvalue(), "err": stderr.getvalue(), "dir": out_dir, "report": report}


def test_bench_writes_both_report_files(bench_run):
    assert bench_run["code"] == 0, bench_run["err"]
    md = (bench_run["dir"] / "report.md").read_text()
    for heading in ("## Overall", "## Per task group", "## Targets", "## Memory-bandwidth floor",
                    "## Speculative decoding against Theorem 3.8", "## Recording overhead", "## Per prompt"):
        assert heading in md
    assert "| method | tau | speedup |" in bench_run["out"]  # the overall table is printed too
    assert "[1/2] q81 writing: ours ar" in bench_run["err"]  # progress: prompt i/N and method
    assert "[2/2] q481 rag: transformers pld" in bench_run["err"]


def test_report_has_every_figure(bench_run):
    report = bench_run["report"]
    assert report["settings"]["methods"] == ["ar", "spec", "pld", "jacobi"]
    assert report["settings"]["max_new_tokens"] == 8
    assert report["settings"]["early_exit_layer"] == 1
    assert set(report["groups"]) == {"multi_turn", "rag"}
    assert len(report["samples"]) == 2
    for stats in [report["overall"]] + list(report["groups"].values()):
        assert set(stats) == {"ar", "ar[again]", "spec", "pld", "jacobi"}
        for method, figures in stats.items():
            ours = figures["ours"]
            for key in ("tau", "speedup", "ms_per_token", "identical", "all_identical"):
                assert ours[key] is not None, (method, key)
            if method not in ("ar", "ar[again]"):
                assert "acceptance" in ours
        for method in ("ar", "spec", "pld"):  # transformers has these three, not Jacobi
            assert stats[method]["theirs"]["ms_per_token"] > 0
            assert "ratio_ms_per_token" in stats[method] and "ratio_speedup" in stats[method]
        assert "theirs" not in stats["jacobi"]
    spec = report["overall"]["spec"]["ours"]
    for key in ("alpha_hat", "c_hat", "predicted_speedup", "predicted_speedup_cost_aware", "verify_cost"):
        assert spec[key] is not None
    floor = report["floor"]
    assert floor["gb_per_s"] > 0 and floor["weight_bytes"] > 0 and floor["floor_ms"] > 0
    assert floor["ours_ms_per_token_x_floor"] > 0
    keys = {t["key"] for t in report["targets"]}
    assert {"ar_vs_transformers", "ar_noise", "pld_tau", "pld_speedup", "pld_not_slower", "spec_thm38",
            "record_overhead_spec", "record_overhead_pld", "record_overhead_jacobi"} <= keys
    # two prompt runs: every target is shown with its figures, none called met or missed
    assert all(t["met"] is None and t["margin"].startswith("too few runs to judge (2 prompt runs")
               or t["margin"].startswith("not judged") for t in report["targets"])
    assert any("Jacobi has no transformers counterpart" in note for note in report["notes"])


def test_the_floor_and_the_verify_cost_curve_are_printed_and_saved(bench_run, tmp_path):
    """T(k) for k = 1..16, measured once at the median prompt's context, sits beside the floor
    on stdout and in report.md; a saved report from before the curve says it was not measured."""
    curve = bench_run["report"]["machine"]["verify_cost_curve"]
    assert len(curve["t"]) == 16 and curve["t"][0] == 1.0 and all(t > 0 for t in curve["t"])
    assert curve["context"] == max(p["prompt_tokens"] for p in bench_run["report"]["prompts"])  # median of two
    values = " ".join(f"{t:.2f}" for t in curve["t"])
    md = (bench_run["dir"] / "report.md").read_text()
    for text in (bench_run["out"], md):
        assert "- floor for one decode step: **" in text
        assert f"- verify-cost curve T(k), k = 1..16 (a k-token forward over a one-token forward, after " \
               f"{curve['context']} tokens): {values}" in text
    old = json.loads(json.dumps(bench_run["report"]))
    del old["machine"]["verify_cost_curve"]
    from decoders.bench.report import render_markdown

    assert "- verify-cost curve T(k): not measured" in render_markdown(old)


def test_ratios_come_from_the_runs_timings(bench_run):
    report = bench_run["report"]
    samples = report["samples"]
    for method in ("ar", "spec", "pld"):
        ours = sum(s["ours"][method]["wall_ms"] for s in samples) / sum(s["ours"][method]["tokens"] for s in samples)
        theirs = (sum(s["theirs"][method]["wall_ms"] for s in samples)
                  / sum(s["theirs"][method]["tokens"] for s in samples))
        assert ours > 0 and theirs > 0
        stats = report["overall"][method]
        assert math.isclose(stats["ours"]["ms_per_token"], ours, rel_tol=1e-2)
        assert math.isclose(stats["theirs"]["ms_per_token"], theirs, rel_tol=1e-2)
        assert math.isclose(stats["ratio_ms_per_token"], ours / theirs, rel_tol=2e-2)
    for sample in samples:
        ar = sample["ours"]["ar"]
        assert ar["wall_ms"] > 0 and ar["tau"] == 1.0
        for label, entry in sample["ours"].items():  # each row over its own baseline, decoded beside it
            own = sample["baselines"].get(label, ar)
            assert (label == "ar") == (label not in sample["baselines"])
            assert math.isclose(entry["speedup"], own["ms_per_token"] / entry["ms_per_token"], rel_tol=1e-3)
        for method in ("spec", "pld", "jacobi"):
            assert sample["record_on"][method]["wall_ms"] > 0


def test_outputs_are_compared_with_baseline_and_transformers(bench_run):
    for sample in bench_run["report"]["samples"]:
        ours, theirs = sample["ours"], sample["theirs"]
        for method in ("spec", "pld"):
            assert ours[method]["matches_transformers"] == (ours[method]["ids"] == theirs[method]["ids"])
            assert theirs[method]["identical"] == (theirs[method]["ids"] == theirs["ar"]["ids"])
        for entry in ours.values():
            assert entry["identical"] == (entry["ids"] == ours["ar"]["ids"])
            assert 1 <= entry["tokens"] <= 8


def test_spec_is_skipped_without_a_helper_and_sweep_prints_its_table(tiny_folder, prompts_file, tmp_path, capsys):
    code, out, err = run_cli(capsys, "bench", "--prompts", prompts_file, "--main", tiny_folder, "--methods",
                             "spec,pld", "--limit", "1", "--record-overhead-every", "0", "--out", str(tmp_path / "a"),
                             *TINY_BENCH)
    assert code == 0, err
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["settings"]["methods"] == ["ar", "pld"]
    assert any("speculative decoding skipped" in note for note in report["notes"])
    assert "speculative decoding skipped" in (tmp_path / "a" / "report.md").read_text()
    assert len(report["samples"]) == 1 and report["samples"][0]["record_on"] == {}

    code, out, err = run_cli(capsys, "bench", "--prompts", prompts_file, "--main", tiny_folder, "--sweep",
                             "k=1..3", "--out", str(tmp_path / "b"), *TINY_BENCH)
    assert code == 0, err
    sweep = json.loads((tmp_path / "b" / "report.json").read_text())
    assert sweep["kind"] == "sweep" and sweep["sweep"] == {"name": "num_pred", "method": "pld", "values": [1, 2, 3]}
    assert [row["value"] for row in sweep["rows"]] == [1, 2, 3]
    assert all(row["measured_speedup"] > 0 and row["n"] == 2 for row in sweep["rows"])
    # in the app's sweep screen's words (issue 36): k, not num_pred; the policy every run had, fixed
    assert "| k | measured speedup | Thm 3.8 |" in out and "Sweep of k (num_pred) · Prompt lookup · draft policy fixed" in out
    assert sweep["settings"]["decode_params"]["draft_policy"] == "fixed"
    markdown = (tmp_path / "b" / "report.md").read_text(encoding="utf-8")
    assert markdown.startswith("# tui-decode bench: sweep of k (num_pred) · Prompt lookup · draft policy fixed\n")
    assert "Fastest measured: k=" in markdown


def test_a_sweep_of_lookaheads_window_runs_each_window_as_given(tiny_folder, prompts_file, tmp_path, capsys):
    """With the adaptive policy W is a cap the run may narrow; a sweep over W must run each value,
    or its points would all be the same shape."""
    code, out, err = run_cli(capsys, "bench", "--prompts", prompts_file, "--main", tiny_folder, "--sweep",
                             "window=1..3", "--limit", "1", "--out", str(tmp_path / "w"), *TINY_BENCH)
    assert code == 0, err
    sweep = json.loads((tmp_path / "w" / "report.json").read_text())
    labels = {int(value): [s["label"] for s in per] for value, per in sweep["samples"].items()}
    assert sorted(labels) == [1, 2, 3]
    for value, per in labels.items():
        assert per and all(f"W={value}," in label and "fixed shape" in label for label in per), per


def test_helper_model_runs_transformers_assisted_generation(tmp_path, prompts_file):
    """With a separate helper, transformers' counterpart is ``assistant_model=``; its draft
    forwards are counted apart from the target's, so both sides' tau mean the same thing."""
    from decoders.bench import run_bench
    from decoders.bench.report import render_markdown
    from decoders.models.family import FamilySpec, load_family

    main_model = tiny_model(seed=0)
    main_dir = save_tiny_model(tmp_path / "main", model=main_model)
    helper_dir = save_tiny_model(tmp_path / "helper", model=perturbed_copy(main_model, 0.05, seed=1))
    family = load_family(FamilySpec(name="pair", main=str(main_dir), draft=HelperModel(source=str(helper_dir)), device="cpu"))
    messages = []
    report = run_bench(family, load_prompts(prompts_file), ["spec"], max_new_tokens=8, limit=1,
                       progress=messages.append, record_overhead_every=0, bandwidth_bytes=1 << 22).to_json()
    theirs = report["samples"][0]["theirs"]["spec"]
    assert theirs["target_forwards"] >= 1 and theirs["draft_forwards"] >= 1
    assert report["settings"]["transformers_counterparts"]["spec"].startswith("generate(assistant_model=helper")
    assert report["overall"]["spec"]["ours"]["tau"] is not None and report["overall"]["spec"]["theirs"]["tau"]
    assert any("[1/1] q81 writing: transformers spec" in m for m in messages)
    assert "## Overall" in render_markdown(report)


@pytest.mark.parametrize("content,argv,message", [
    (None, [], "no prompts file at"),
    ("{not json\n", [], "line 1 is not valid JSON"),
    ('{"question_id": 1, "category": "qa", "turns": ["x"]}\n[1, 2]\n', [], "line 2 is not a JSON object"),
    ('{"question_id": 1, "turns": ["x"]}\n', [], "line 1 lacks category"),
    ('{"question_id": 1, "category": "qa", "turns": []}\n', [], "turns must be a list whose first item"),
    ("\n\n", [], "holds no prompts"),
    ('{"question_id": NaN, "category": "qa", "turns": ["x"]}\n', [],  # issue 26: bare NaN in report.json
     "line 1: question_id is nan, which the JSON report cannot hold"),
    ('{"question_id": 1, "category": "qa", "turns": ["a \\ud800 b"]}\n', [],  # issue 26: the tokenizer's TypeError
     "line 1: the first turn is not valid UTF-8 text"),
    (PROMPTS, ["--methods", "ar,warp"], "unknown method 'warp' in --methods"),
    (PROMPTS, ["--methods", " , "], "no methods given"),
    (PROMPTS, ["--sweep", "gamma=5..1"], "bad sweep 'gamma=5..1': 5 > 1"),
    (PROMPTS, ["--sweep", "temperature=1..3"], "cannot sweep 'temperature'"),
    (PROMPTS, ["--sweep", "gamma=a..b"], "the values must be integers"),
    (PROMPTS, ["--sweep", "gamma"], "bad sweep 'gamma'"),
    (PROMPTS, ["--sweep", "block=0..2"], "the values must be integers >= 1"),
    (PROMPTS, ["--sweep", "gamma=1..99999999999999999999"], "over 10^12 values, at most 32"),  # issue 26: OverflowError
    (PROMPTS, ["--sweep", "gamma=1..1000000000"], "1000000000 values, at most 32"),  # issue 26: an 8 GB list first
    (PROMPTS, ["--sweep", "gamma=1," + "2" * 200_000], "bad sweep 'gamma=1,222"),  # not the whole 200 kB again
    (PROMPTS, ["--limit", "0"], "limit must be an integer >= 1"),
    (PROMPTS, ["--repeats", "0"], "repeats must be an integer >= 1"),
    (PROMPTS, ["--threads", "0"], "threads must be an integer >= 1"),
    (PROMPTS, ["--record-overhead-every", "-1"], "record_overhead_every must be an integer >= 0"),
    (PROMPTS, ["--gamma", "0"], "gamma must be an integer >= 1"),
    (PROMPTS, ["--max-new-tokens", "0"], "max_new_tokens must be an integer >= 1"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, content, argv, message):
    path = tmp_path / "prompts.jsonl"
    if isinstance(content, list):
        path.write_text("".join(json.dumps(p) + "\n" for p in content))
    elif content is not None:
        path.write_text(content)
    code, out, err = run_cli(capsys, "bench", "--prompts", str(path), "--main", "/nonexistent/model", *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err and len(err) < 2000
    assert out == ""


def test_unloadable_model_is_one_line(capsys, prompts_file):
    code, _, err = run_cli(capsys, "bench", "--prompts", prompts_file, "--main", "/nonexistent/model")
    assert code == 2 and "/nonexistent/model" in err and err.count("\n") == 1


def test_prompts_are_taken_round_robin_over_task_groups():
    prompts = [BenchPrompt(i, cat, f"p{i}") for i, cat in
               enumerate(["writing", "math", "translation", "translation", "qa", "rag", "rag"])]
    chosen = select_prompts(prompts, 4)
    assert [p.question_id for p in chosen] == [0, 2, 4, 5]  # one per group first, in Spec-Bench group order
    assert select_prompts(prompts, None) == prompts
    assert [task_group(c) for c in ("math", "math_reasoning", "stem", "rag", "poetry")] == [
        "multi_turn", "math_reasoning", "multi_turn", "rag", "poetry"]


def test_parsers():
    assert parse_methods("pld,ar,jacobi") == ("ar", "pld", "jacobi")
    assert parse_methods("spec") == ("ar", "spec")
    assert parse_sweep("gamma=1..4").values == (1, 2, 3, 4)
    assert parse_sweep("m=2,4,8") == parse_sweep("block=2,4,8")
    assert parse_sweep("k=3").method == "pld"
    with pytest.raises(DecodeError, match="at most 32"):
        parse_sweep("gamma=1..100")


def test_shipped_prompts_load():
    prompts = load_prompts(Path(__file__).resolve().parents[2] / "bench" / "spec_bench_dev.jsonl")
    assert len(prompts) == 24
    assert {p.group for p in prompts} == {"multi_turn", "translation", "summarization", "qa", "math_reasoning", "rag"}
    assert len({p.group for p in select_prompts(prompts, 12)}) == 6


def test_saved_report_loads_back_and_renders_the_same(bench_run, tmp_path):
    """report.json is enough to rebuild the typed report: it writes the same JSON and markdown."""
    from decoders.bench.report import load_report, render_markdown, write_report
    from decoders.bench.report_pair import pair_line

    saved = bench_run["dir"] / "report.json"
    report = load_report(saved)
    assert report.to_json() == json.loads(saved.read_text())
    assert render_markdown(report) + pair_line(saved.read_bytes()) == (bench_run["dir"] / "report.md").read_text()
    md, js = write_report(report, tmp_path)
    assert js.read_text() == saved.read_text() and md.read_text() == (bench_run["dir"] / "report.md").read_text()
    with pytest.raises(DecodeError, match="not a bench report"):
        render_markdown({"schema": 99})


def test_acceptance_is_pooled_with_vllm_definitions(bench_run):
    """Mean acceptance length and per-position acceptance pool the runs' counts (vLLM's
    definitions), and report.md shows them where it shows acceptance."""
    report = bench_run["report"]
    for method in ("spec", "pld", "jacobi"):
        entries = [s["ours"][method] for s in report["samples"]]
        drafts = sum(e["drafts"] for e in entries)
        per_pos = [sum(e["accepted_per_pos"][i] for e in entries if i < len(e["accepted_per_pos"]))
                   for i in range(max(len(e["accepted_per_pos"]) for e in entries))]
        ours = report["overall"][method]["ours"]
        assert drafts > 0
        assert ours["mean_acceptance_length"] == round(1 + sum(e["accepted"] for e in entries) / drafts, 3)
        assert ours["per_position_acceptance"] == [round(a / drafts, 3) for a in per_pos]
        assert ours["per_position_acceptance"][0] >= ours["per_position_acceptance"][-1]
    assert "mean_acceptance_length" not in report["overall"]["ar"]["ours"]
    md = (bench_run["dir"] / "report.md").read_text()
    assert "| acceptance | mean acceptance length | per-position acceptance |" in md


@pytest.fixture
def lookback_method():
    """A method that exists only in this test (the registry test's), with a short alias."""
    from decoders.core.declarations import BenchTarget, Method, register, unregister
    from tests.support.lookback import SPAN, lookback

    beats = BenchTarget("beats", "lookback faster than autoregressive on every task group", other="ar")
    method = register(Method(name="lookback", label="Lookback", run=lookback, params=(SPAN,), greedy_only=True,
                             detail="echo", draft_length="span", aliases={"s": "span"}, bench_targets=(beats,)))
    yield method
    unregister("lookback")


def test_a_registered_method_reaches_the_bench_with_no_edit(lookback_method, tiny_folder, prompts_file, tmp_path,
                                                            capsys):
    assert parse_methods("lookback,pld") == ("ar", "pld", "lookback")
    assert parse_sweep("span=1..3") == parse_sweep("s=1,2,3")
    assert parse_sweep("s=2").method == "lookback"
    with pytest.raises(DecodeError, match="integers <= 6"):
        parse_sweep("span=1..7")

    code, out, err = run_cli(capsys, "bench", "--prompts", prompts_file, "--main", tiny_folder, "--methods",
                             "lookback", "--span", "3", "--limit", "1", "--record-overhead-every", "0",
                             "--out", str(tmp_path / "a"), *TINY_BENCH)
    assert code == 0, err
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["settings"]["methods"] == ["ar", "lookback"]
    assert report["settings"]["decode_params"]["span"] == 3
    assert any("Lookback has no transformers counterpart" in note for note in report["notes"])
    assert report["overall"]["lookback"]["ours"]["mean_acceptance_length"] is not None
    assert "| Lookback |" in out
    # its declared target is judged, and only the declared ones (no other method's targets for its row)
    target = next(t for t in report["targets"] if t["key"] == "lookback_vs_ar")
    assert target["target"] == "lookback faster than autoregressive on every task group"
    assert not any(t["key"].startswith(("pld_", "spec_thm38", "lookahead_vs")) for t in report["targets"])

    code, out, err = run_cli(capsys, "bench", "--prompts", prompts_file, "--main", tiny_folder, "--sweep", "s=1..2",
                             "--limit", "1", "--out", str(tmp_path / "b"), *TINY_BENCH)
    assert code == 0, err
    sweep = json.loads((tmp_path / "b" / "report.json").read_text())
    assert sweep["sweep"] == {"name": "span", "method": "lookback", "values": [1, 2]}
    assert all(row["predicted_speedup"] is not None for row in sweep["rows"])  # from the declared draft length


def test_the_engine_core_does_not_import_the_bench():
    """transformers' reference (and the rest of the bench) stay outside the engine core: no module
    of decoders/ outside decoders/bench/ imports them, and importing the bench loads no torch."""
    import ast
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2] / "decoders"
    offenders = []
    for path in root.rglob("*.py"):
        if (root / "bench") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(root.parent)}: {n}" for n in names if n.startswith("decoders.bench")]
    assert offenders == []
    code = "import sys, decoders.bench.report; print('torch' in sys.modules or 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root.parent)
    assert out.stdout.strip() == "False", out.stderr


def test_swept_values_are_checked_with_the_other_parameters_before_the_model_loads(capsys, prompts_file):
    code, out, err = run_cli(capsys, "bench", "--prompts", prompts_file, "--main", "/nonexistent/model",
                             "--sweep", "ngram_min=2..4")
    assert code == 2 and "ngram_min (4) is larger than ngram_max (3)" in err and "/nonexistent" not in err


def test_every_method_has_a_spread_and_ar_reads_one_inside_it(bench_run):
    """The AR row is 1.00x with the noise every row carries; report.md shows a spread column."""
    report = bench_run["report"]
    ar = report["overall"]["ar"]["ours"]
    assert ar["speedup"] == 1.0 and ar["speedup_spread"] > 0  # AR against itself: the noise, never "exact"
    for method in ("spec", "pld", "jacobi"):
        assert report["overall"][method]["ours"]["speedup_spread"] > 0
    assert all(s["ours"][m]["timing_noise"] >= 0 for s in report["samples"] for m in ("ar", "spec"))
    assert "speedup_spread" not in report["overall"]["ar"]["theirs"]  # transformers' runs have no probe
    md = (bench_run["dir"] / "report.md").read_text()
    assert "| method | tau | speedup | spread | acceptance |" in md
    assert f"| Autoregressive | {ar['tau']:.2f} | 1.00x | +/- {ar['speedup_spread']:.2f} |" in md


def test_ar_is_timed_again_against_its_own_baseline(bench_run):
    """The same decode on both sides of the pairing: its ratio is a measurement (not 1.00x by
    definition), the same tokens out, and the noise target judges it from those figures."""
    report = bench_run["report"]
    again = [s["ours"]["ar[again]"] for s in report["samples"]]
    for sample, entry in zip(report["samples"], again, strict=False):
        assert entry["ids"] == sample["ours"]["ar"]["ids"] and entry["identical"] is True
        own = sample["baselines"]["ar[again]"]  # its own baseline, decoded beside it (interleaved)
        assert own["ids"] == entry["ids"] and sample["pairing"] == "interleaved"
        assert entry["speedup"] == round(own["ms_per_token"] / entry["ms_per_token"], 4)
    pooled = report["overall"]["ar[again]"]["ours"]
    assert pooled["speedup"] != 1.0 or all(e["speedup"] == 1.0 for e in again)
    assert pooled["speedup_spread"] > 0
    target = next(t for t in report["targets"] if t["key"] == "ar_noise")
    assert target["value"] == f"{pooled['speedup']:.3f}x +/- {pooled['speedup_spread']:.3f}"
    inside = abs(pooled["speedup"] - 1) <= pooled["speedup_spread"]
    assert target["met"] is None and "too few runs to judge" in target["margin"]  # two prompts
    assert ("is outside its spread" in target["margin"]) == (not inside)  # what it would say, still shown
    assert "| Autoregressive [again] |" in (bench_run["dir"] / "report.md").read_text()
    assert "[2/2] q481 rag: ours ar again" in bench_run["err"]


def test_spread_pools_per_prompt_speedups_and_timing_noise():
    from decoders.bench.aggregate import speedup_spread
    from decoders.bench.measure import OursEntry

    def entry(speedup, noise):
        return OursEntry(method="spec", label="", tokens=8, wall_ms=10.0, ms_per_token=1.25, target_forwards=4,
                         tau=2.0, finish="length", identical=True, first_divergence=None, decode_step_ms=1.0, ids=[],
                         speedup=speedup, timing_noise=noise)

    # AR: 1.00 on every prompt; only the timing noise, sqrt(0.03^2 + 0.04^2) / 2 prompts, twice
    assert speedup_spread([entry(1.0, 0.03), entry(1.0, 0.04)], 1.0) == 0.05
    # a method: stdev sqrt(0.02) / mean 1.5 / sqrt 2 between prompts (relative), no timing noise
    assert speedup_spread([entry(1.4, None), entry(1.6, None)], 1.5) == round(2 * 1.5 * 0.02 ** 0.5 / 1.5 / 2 ** 0.5, 3)
    assert speedup_spread([entry(1.4, None)], 1.4) is None  # one prompt, no probe: unknown, not zero
    assert speedup_spread([entry(1.0, None), entry(1.0, None)], 1.0) is None  # AR with no probe: not "+/- 0.00"
    # both, in quadrature: 2 * 1.5 * sqrt(0.0667^2 + 0.025^2)
    assert speedup_spread([entry(1.4, 0.03), entry(1.6, 0.04)], 1.5) == 0.214
