"""report.json as declared records: reports written before the records were msgspec Structs
(tests/data/report_*.json) load and write back byte for byte, settings of every older shape open
and render as they did, and a damaged one is refused in one line naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec import UNSET

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
    assert damage(tmp_path, "report_bench.json", lambda d: d["family"].update(weight_bytes="big")).endswith(
        "family.weight_bytes must be an integer, got str")
    assert damage(tmp_path, "report_sweep.json", lambda d: d["family"].update(label=["a"])).endswith(
        "family.label must be text or null, got array")
    assert "not a bench report of schema 1" in damage(tmp_path, "report_bench.json", lambda d: d.pop("schema"))


# report.md's lines that the settings and the machine write, as the bench rendered
# tests/data/report_bench.json while both were plain dicts read by key
MACHINE_LINE = ("- machine: x86_64, 2 CPUs, 1 torch threads; torch 2.13.0+cpu, transformers 5.24.0; load average "
                "(1 min) {} at start, {} at the end (**above the 2 CPUs: other processes competed for them, so timings "
                "are noisier than on an idle machine**)")
SETTINGS_LINES = [
    "- prompts: 2 (first turn, chat template), 8 new tokens, greedy, 1 repeat(s)",
    "- parameters: spec gamma=4, draft_policy=fixed, tree_width=1, tree_depth=2; pld branches=1, num_pred=10, "
    "ngram_max=3, ngram_min=1, draft_policy=fixed; jacobi block=4, init=repeat",
    "- pairing: sequential (every row against the prompt's one baseline; not recorded in this report)",
    "- transformers (tf) counterparts: Autoregressive: `generate(do_sample=False)`; Speculative: "
    "`generate(assistant_early_exit=1, num_assistant_tokens=4, num_assistant_tokens_schedule='constant', "
    "assistant_confidence_threshold=0)`; Prompt lookup: `generate(prompt_lookup_num_tokens=10, "
    "max_matching_ngram_size=3)`; Speculative [tree 2x2]: `generate(assistant_early_exit=1, num_assistant_tokens=4, "
    "num_assistant_tokens_schedule='constant', assistant_confidence_threshold=0)`; Prompt lookup [branches 2]: "
    "`generate(prompt_lookup_num_tokens=10, max_matching_ngram_size=3)`",
]
CURVE_LINE = ("- verify-cost curve T(k), k = 1..16 (a k-token forward over a one-token forward, after 14 tokens): "
              "1.00 2.29 2.59 2.17 2.12 2.20 2.17 2.50 2.21 2.31 2.61 2.22 2.38 2.28 2.23 2.37")
VARIANT_LINES = [
    "| spec[tree 2x2] | spec | tree_width=2, tree_depth=2 | early exit @ layer 1 | `generate(assistant_early_exit=1, "
    "num_assistant_tokens=4, num_assistant_tokens_schedule='constant', assistant_confidence_threshold=0)` (closest) |",
    "| pld[branches 2] | pld | branches=2 | – | `generate(prompt_lookup_num_tokens=10, max_matching_ngram_size=3)` "
    "(closest) |",
]


def _oldest(data):
    """The report as the first bench wrote its settings and machine: the methods' parameters one key
    each, no rows of variants, no reference, no pairing, no verify-cost curve; and in each a key
    that no field declares."""
    old = {k: v for k, v in data["settings"].items() if k != "variants"}
    assert not {"reference", "pairing", "variants"} & set(old) and {"gamma", "ngram", "jacobi_init"} <= set(old)
    data["settings"] = old | {"a_key_from_elsewhere": {"x": 1}}
    data["machine"] = {k: v for k, v in data["machine"].items() if k != "verify_cost_curve"} | {
        "load_average_at_start": [3.5, 0.4, 0.3], "load_average": [0.5, 0.4, 0.3], "gpu": None}


@pytest.mark.parametrize("shape", ["before reference and pairing", "before variants"])
def test_settings_of_an_older_report_open_and_render_as_before(tmp_path, shape):
    data = json.loads((DATA / "report_bench.json").read_text())
    if shape == "before variants":
        _oldest(data)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    report = load_report(path)
    st = report.settings
    assert (st.max_new_tokens, st.repeats, st.gamma, st.ngram, st.jacobi_init) == (8, 1, 4, (1, 3), "repeat")
    assert st.reference is UNSET and st.pairing is UNSET and report.machine.llama_cpp_python is UNSET
    md = render_markdown(report).splitlines()
    for line in SETTINGS_LINES:
        assert line in md
    if shape == "before variants":
        assert st.rows == [] and "## Variants" not in md
        assert report.machine.verify_cost_curve is UNSET and "- verify-cost curve T(k): not measured" in md
        assert MACHINE_LINE.format("3.5", "0.5") in md
        saved = report.to_json()  # written back as read, but for the keys no field declares
        assert saved["settings"] == {k: v for k, v in data["settings"].items() if k != "a_key_from_elsewhere"}
        assert saved["machine"] == {k: v for k, v in data["machine"].items() if k != "gpu"}
    else:
        assert CURVE_LINE in md and MACHINE_LINE.format("2.2", "2.2") in md
        assert [v.label for v in st.rows][-2:] == ["spec[tree 2x2]", "pld[branches 2]"]
        assert st.rows[-1].params == {"branches": 2} and st.rows[-1].backend is UNSET
        assert md[md.index("## Variants") + 6:][:2] == VARIANT_LINES


@pytest.mark.parametrize("change, message", [
    (lambda s: s.update(repeats="1"), "settings.repeats must be an integer, got str"),
    (lambda s: s.update(mode="sampling"), "settings.mode has an invalid value 'sampling'"),
    (lambda s: s.pop("methods"), "settings has no methods"),
    (lambda s: s["variants"][4].update(params=["branches", 2]),
     "settings.variants[4].params must be an object, got array"),
    (lambda s: s.update(pairing={"ar": "interleaved", "pld": "twice"}),
     "settings.pairing.pld has an invalid value 'twice'"),
    (lambda s: s["transformers_counterparts"].update(pld=10),
     "settings.transformers_counterparts.pld must be text or null, got int"),
])
def test_a_wrong_typed_setting_is_refused_in_one_line(tmp_path, change, message):
    assert damage(tmp_path, "report_bench.json", lambda d: change(d["settings"])).endswith(
        f"is not a valid bench report: {message}")


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(cpus="2"), "machine.cpus must be an integer or null, got str"),
    (lambda m: m.pop("torch"), "machine has no torch"),
    (lambda m: m["verify_cost_curve"]["t"].__setitem__(3, "fast"), "machine.verify_cost_curve.t[3] must be a number, got str"),
])
def test_a_wrong_typed_machine_field_is_refused_in_one_line(tmp_path, change, message):
    assert damage(tmp_path, "report_bench.json", lambda d: change(d["machine"])).endswith(
        f"is not a valid bench report: {message}")


def _sweep_lines(report):
    return [line for line in render_markdown(report).splitlines() if line.startswith(("- prompts:", "- pairing:"))]


def test_sweep_settings_saved_before_open_typed_and_render_as_before(tmp_path):
    """tests/data/report_sweep.json holds the earliest settings (each method's parameters one key,
    no pairing); a later sweep's hold ``pairing`` and no such keys. Both read as `SweepSettings`
    and render the lines they rendered as plain dicts read by key."""
    earliest = load_report(DATA / "report_sweep.json")
    st = earliest.settings
    assert (st.max_new_tokens, st.limit, st.repeats, st.gamma, st.ngram, st.draft_policy) == (8, None, 1, 4, (1, 3),
                                                                                              "adaptive")
    assert st.pairing is UNSET and earliest.machine.torch_threads == 1
    assert _sweep_lines(earliest) == [
        "- prompts: 2, 8 new tokens, greedy, 1 repeat(s); our AR: 0.9 ms/token",
        "- pairing: sequential (every value against the prompt's one baseline; not recorded in this report)"]
    data = json.loads((DATA / "report_sweep.json").read_text())
    data["settings"] = {"max_new_tokens": 8, "limit": None, "repeats": 2,
                        "decode_params": data["settings"]["decode_params"], "pairing": "interleaved"}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    later = load_report(path)
    assert later.settings.pairing == "interleaved" and later.settings.gamma is UNSET
    assert later.to_json()["settings"] == data["settings"]  # no key the earliest reports had comes back
    assert _sweep_lines(later)[1].startswith("- pairing: every value interleaved: each with its own autoregressive")
    data["settings"]["pairing"] = "twice"
    assert damage(tmp_path, "report_sweep.json", lambda d: d.update(settings=data["settings"])).endswith(
        "settings.pairing has an invalid value 'twice'")


# a batch report as `bench --batch` wrote it before the cost model (no draft_policy in its settings;
# no policy, k or draft lengths in its rows), when its settings and machine were dicts read by key
OLD_BATCH = {
    "schema": 1, "kind": "batch", "created": "2026-12-04T09:00:00+0000",
    "family": {"label": "model", "main": "/tmp/model", "helper": None, "device": "cpu", "dtype": "float32"},
    "machine": {"cpu": "Intel Xeon", "vector": "avx2 avx512f", "cpus": 2, "threads": 1, "load_before": [0.5, 0.4, 0.3],
                "load_after": [1.25, 0.5, 0.3]},
    "settings": {"batches": [1, 2], "methods": ["ar", "pld"], "max_new_tokens": 8, "rounds": 2, "k": 10, "prompts": 4},
    "surface": {"1": [1.0, 1.5], "2": [1.8, 2.4]}, "surface_unit_ms": 12.5,
    "rows": [{"method": "ar", "batch": 1, "throughput": 40.0, "latency_s": 0.2, "ar_throughput": 40.0, "speedup": 1.0,
              "spread": None, "forwards": 8, "accepted_per_forward": 1.0, "identical": True},
             {"method": "pld", "batch": 2, "throughput": 90.0, "latency_s": 0.18, "ar_throughput": 75.0,
              "speedup": 1.2, "spread": 0.05, "forwards": 5, "accepted_per_forward": 1.6, "identical": True}],
    "crossover": {"pld": "pays at every batch size measured (up to 2)"}, "divergences": [], "notes": [],
    "elapsed_s": 3.5}


@pytest.mark.parametrize("machine, line", [
    (OLD_BATCH["machine"], "2026-12-04T09:00:00+0000; cpu Intel Xeon; vector avx2 avx512f; threads 1; load average "
     "before [0.5, 0.4, 0.3], after [1.25, 0.5, 0.3]; 8 tokens per sequence, 2 rounds"),
    ({}, "2026-12-04T09:00:00+0000; cpu ?; vector ?; threads ?; load average before None, after None; 8 tokens per "
     "sequence, 2 rounds"),  # `run_batch_bench` called with no machine
])
def test_a_batch_report_saved_before_opens_typed_and_renders_as_before(tmp_path, machine, line):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({**OLD_BATCH, "machine": machine}))
    report = load_report(path)
    st, m = report.settings, report.machine
    assert (st.batches, st.methods, st.max_new_tokens, st.rounds, st.k, st.prompts) == ([1, 2], ["ar", "pld"], 8, 2,
                                                                                        10, 4)
    assert st.draft_policy is UNSET and (m.threads == 1) is bool(machine)
    assert render_markdown(report).splitlines()[2] == line
    saved = report.to_json()  # written back as read
    assert saved["settings"] == OLD_BATCH["settings"] and saved["machine"] == machine


@pytest.mark.parametrize("change, message", [
    (lambda d: d["settings"].update(rounds="2"), "settings.rounds must be an integer, got str"),
    (lambda d: d["settings"].pop("batches"), "settings has no batches"),
    (lambda d: d["machine"].update(threads=[1]), "machine.threads must be an integer, got array"),
])
def test_a_wrong_typed_batch_setting_is_refused_in_one_line(tmp_path, change, message):
    data = json.loads(json.dumps(OLD_BATCH))
    change(data)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DecodeError) as err:
        load_report(path)
    assert str(err.value).endswith(f"is not a valid bench report: {message}") and "\n" not in str(err.value)
