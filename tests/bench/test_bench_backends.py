"""`tui-decode bench --backends torch,llamacpp`: the bundled GGUF on both backends in one run.

One short run (two prompts, six tokens, AR and prompt lookup) through the command line, shared by
the tests: every row on each backend under its backend's label, each speedup over its own
backend's AR, each backend's weights, floor and T(k), llama-cpp-python's own loop beside the
llama.cpp rows and transformers' beside the torch rows, and the agreement of the two ARs. No
timing assertions (two busy cores): only which figure is computed from which runs.
"""

from __future__ import annotations

import io
import json
import statistics
from contextlib import redirect_stderr, redirect_stdout

import pytest

pytest.importorskip("llama_cpp")

from decoders.bench import lanes  # noqa: E402
from decoders.bench.common import on_backend, split_backend  # noqa: E402
from decoders.bench.multi import parse_backends  # noqa: E402
from decoders.core.errors import DecodeError  # noqa: E402
from decoders.engine import Engine  # noqa: E402
from tests.support.threads import torch_threads  # noqa: E402
from tui_decode.cli.main import main  # noqa: E402

PROMPTS = [
    {"question_id": 7, "category": "writing", "turns": ["Say this twice: red fox, blue fox. red fox, blue fox."]},
    {"question_id": 8, "category": "qa", "turns": ["What is the capital of France?"]},
]
ROWS = ["ar", "ar[again]", "pld"]
BACKENDS = {"torch": "torch", "llamacpp": "llama.cpp"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("backends")
    prompts = folder / "two.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    out_dir = folder / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    curve = lanes.verify_cost_curve

    def no_curve(engine, seq, cancelled=lambda: False):
        """No T(k) in the engine's summaries (measured again in every fresh engine, seconds each)."""
        return None
        yield  # a generator, as the engine's own

    with redirect_stdout(stdout), redirect_stderr(stderr), torch_threads(1), pytest.MonkeyPatch.context() as mp:
        # time, not bookkeeping: one pass of the report's curve (its 16 widths on each backend are
        # checked), none in the engines' summaries, and no warm-up
        mp.setattr(lanes, "verify_cost_curve", lambda family, ids: curve(family, ids, repeats=1))
        mp.setattr(Engine, "cost_curve", no_curve)
        mp.setattr(lanes, "warm_up_rows", lambda *args: None)
        code = main(["bench", "--backends", "torch,llamacpp", "--main", "bundled", "--prompts", str(prompts),
                     "--methods", "ar,pld", "--max-new-tokens", "6", "--bandwidth-mb", "16",
                     "--draft-policy", "fixed",  # no calibration of the adaptive policy in every fresh engine
                     "--record-overhead-every", "0", "--threads", "1", "--out", str(out_dir)])
    assert code == 0, stderr.getvalue()[-3000:]
    return {"out": stdout.getvalue(), "err": stderr.getvalue(), "dir": out_dir,
            "report": json.loads((out_dir / "report.json").read_text())}


def _samples(report, backend):
    return [s for s in report["samples"] if s["backend"] == backend]


@pytest.mark.model  # the bundled model, on both backends
def test_every_row_runs_on_each_backend_under_its_label(run):
    report = run["report"]
    expected = [f"{row} [{shown}]" for shown in BACKENDS.values() for row in ROWS]
    assert list(report["overall"]) == expected
    assert report["settings"]["methods"] == ["ar [torch]", "pld [torch]", "ar [llama.cpp]", "pld [llama.cpp]"]
    assert report["settings"]["backends"] == ["torch", "llamacpp"]
    for group in report["groups"].values():
        assert list(group) == expected
    # each backend's samples: both prompts, every row, nothing of the other backend's
    for backend in BACKENDS:
        samples = _samples(report, backend)
        assert [s["question_id"] for s in samples] == [7, 8]
        assert all(set(s["ours"]) == set(ROWS) for s in samples)
    assert {s["backend"] for s in report["samples"]} == set(BACKENDS)
    assert report["backends"]["llamacpp"]["family"]["backend"] == "LlamaCppBackend"
    assert report["backends"]["torch"]["family"]["backend"] != "LlamaCppBackend"


@pytest.mark.model  # the bundled model, on both backends
def test_each_speedup_is_over_its_own_backends_ar(run):
    report = run["report"]
    for backend, shown in BACKENDS.items():
        samples = _samples(report, backend)
        for s in samples:
            ar, pld = s["ours"]["ar"], s["ours"]["pld"]
            assert pld["speedup"] == round(ar["ms_per_token"] / pld["ms_per_token"], 4)
            assert ar["identical"] and pld["identical"] is True  # greedy prompt lookup: AR's tokens
        rate = statistics.fmean(1000 * s["ours"]["pld"]["tokens"] / s["ours"]["pld"]["wall_ms"] for s in samples)
        ar_rate = statistics.fmean(1000 * s["ours"]["ar"]["tokens"] / s["ours"]["ar"]["wall_ms"] for s in samples)
        stats = report["overall"][f"pld [{shown}]"]["ours"]
        assert stats["speedup"] == round(rate / ar_rate, 3)
        assert report["overall"][f"ar [{shown}]"]["ours"]["speedup"] == 1.0
        tokens = sum(s["ours"]["ar"]["tokens"] for s in samples)
        wall = sum(s["ours"]["ar"]["wall_ms"] for s in samples)
        assert report["overall"][f"ar [{shown}]"]["ours"]["ms_per_token"] == round(wall / tokens, 3)


@pytest.mark.model  # the bundled model, on both backends
def test_each_backend_has_its_own_weights_floor_and_curve(run):
    report = run["report"]
    sides = report["backends"]
    assert 90e6 < sides["llamacpp"]["floor"]["weight_bytes"] < 110e6  # Q4_1 as stored
    assert 500e6 < sides["torch"]["floor"]["weight_bytes"] < 560e6  # dequantised to float32
    assert report["floor"] == sides["torch"]["floor"]  # the first backend's is the report's own
    for backend, shown in BACKENDS.items():
        side = sides[backend]
        floor = side["floor"]
        assert floor["gb_per_s"] == report["bandwidth"]["best_gb_per_s"]  # one machine, one bandwidth
        assert floor["floor_ms"] == round(floor["weight_bytes"] / (floor["gb_per_s"] * 1e9) * 1000, 3)
        assert floor["ours_ms_per_token"] == report["overall"][f"ar [{shown}]"]["ours"]["ms_per_token"]
        assert floor["transformers_ms_per_token"] == report["overall"][f"ar [{shown}]"]["theirs"]["ms_per_token"]
        curve = side["verify_cost_curve"]
        assert len(curve["t"]) == 16 and curve["t"][0] == 1.0
        assert side["rows"] == [f"{row} [{shown}]" for row in ROWS]
    assert sides["torch"]["verify_cost_curve"]["context"] == sides["llamacpp"]["verify_cost_curve"]["context"]
    out = run["out"]
    assert "| llama.cpp | 96.6 MB (Q4_1) |" in out
    assert "| torch | 537.9 MB (float32) |" in out
    assert "- torch: verify-cost curve T(k), k = 1..16" in out
    assert "- llama.cpp: verify-cost curve T(k), k = 1..16" in out


@pytest.mark.model  # the bundled model, on both backends
def test_each_backend_is_measured_beside_its_own_reference(run):
    report = run["report"]
    calls = report["backends"]["llamacpp"]["counterparts"]
    assert calls["ar [llama.cpp]"] == "Llama(flash_attn=True).generate(temp=0)"
    assert "draft_model=LlamaPromptLookupDecoding(num_pred_tokens=10, max_ngram_size=3)" in calls["pld [llama.cpp]"]
    assert report["backends"]["torch"]["counterparts"]["ar [torch]"].startswith("generate(")
    assert report["settings"]["references"] == {"torch": "transformers", "llamacpp": "llama-cpp-python"}
    for s in _samples(report, "llamacpp"):
        assert s["theirs"]["ar"]["label"] == "llama-cpp-python Llama.generate() greedy"
        assert s["theirs"]["pld"]["label"].startswith("llama-cpp-python LlamaPromptLookupDecoding")
        assert s["theirs"]["pld"]["identical"] is True  # their prompt lookup gives their greedy tokens
        # one llama_decode per target forward: the prompt with the first token, then one a token
        assert s["theirs"]["ar"]["target_forwards"] == s["theirs"]["ar"]["tokens"]
        assert s["theirs"]["ar"]["first_token_ms"] < s["theirs"]["ar"]["wall_ms"]
        assert s["theirs"]["ar"]["decode_ms_per_token"] is not None
        # the same kernels (flash attention as the engine's context picks it): the same tokens
        assert s["ours"]["ar"]["ids"] == s["theirs"]["ar"]["ids"]
    for s in _samples(report, "torch"):
        assert s["theirs"]["ar"]["label"] == "transformers generate() greedy"
    targets = {t["key"]: t for t in report["targets"]}
    assert targets["ar_vs_llama_cpp [llama.cpp]"]["goal"] == "<= 1.15x"
    assert targets["ar_vs_llama_cpp [llama.cpp]"]["target"] == \
        "[llama.cpp] autoregressive decode ms/token vs llama-cpp-python's own greedy loop"
    # judged on the loop after the first token (the prefill is the same llama_decode on both sides)
    ar = report["overall"]["ar [llama.cpp]"]
    ours_decode, theirs_decode = ar["ours"]["decode_ms_per_token"], ar["theirs"]["decode_ms_per_token"]
    assert targets["ar_vs_llama_cpp [llama.cpp]"]["value"].startswith(
        f"{ours_decode / theirs_decode:.2f}x on decode ({ours_decode:.1f} vs {theirs_decode:.1f} ms/token")
    assert "decode_ms_per_token" not in report["overall"]["ar [torch]"]["theirs"]  # generate() yields no first token
    assert targets["ar_vs_transformers [torch]"]["value"].startswith(
        f"{report['overall']['ar [torch]']['ratio_ms_per_token']:.2f}x (")
    assert targets["ar_vs_transformers [torch]"]["goal"] == "<= 0.80x"
    assert "pld_tau [llama.cpp]" in targets and "pld_tau [torch]" in targets
    assert "ar_vs_transformers [llama.cpp]" not in targets


@pytest.mark.model  # the bundled model, on both backends
def test_the_backends_ar_outputs_are_compared_on_every_prompt(run):
    report = run["report"]
    agreement = report["agreement"]
    assert [a["question_id"] for a in agreement] == [7, 8]
    torch_ar = {s["question_id"]: s["ours"]["ar"]["ids"] for s in _samples(report, "torch")}
    llama_ar = {s["question_id"]: s["ours"]["ar"]["ids"] for s in _samples(report, "llamacpp")}
    for a in agreement:
        assert a["backends"] == ["torch", "llamacpp"]
        a_ids, b_ids = torch_ar[a["question_id"]], llama_ar[a["question_id"]]
        assert a["identical"] == (a_ids == b_ids)
        assert a["tokens"] == [len(a_ids), len(b_ids)]
        if not a["identical"]:
            d = a["first_divergence"]
            assert a_ids[:d] == b_ids[:d] and a["chosen"] == [a_ids[d], b_ids[d]]
            assert len(a["margin"]) == 2 and a["top2"][0][0] == a_ids[d]  # torch's greedy token is its top-1


@pytest.mark.model  # the bundled model, on both backends
def test_the_printed_tables_label_every_row_with_its_backend(run):
    out, md = run["out"], (run["dir"] / "report.md").read_text()
    for text in (out, md):
        for row in ("Autoregressive [torch]", "Prompt lookup [torch]", "Autoregressive [llama.cpp]",
                    "Prompt lookup [llama.cpp]"):
            assert f"| {row} |" in text
        assert "| method | torch ms/token | torch speedup |" in text  # the side-by-side table
        assert "| llama.cpp ms/token | llama.cpp speedup |" in text
        assert "| ref tau | ref speedup | ref ms/token | matches ref |" in text
    assert "## Agreement between the backends' AR outputs" in md
    # prompt by prompt, the backends take turns going first
    err = run["err"]
    assert err.index("[1/2] q7 writing [torch]: ours ar") < err.index("[1/2] q7 writing [llama.cpp]: ours ar")
    assert err.index("[2/2] q8 qa [llama.cpp]: ours ar") < err.index("[2/2] q8 qa [torch]: ours ar")
    assert "[2/2] q8 qa [llama.cpp]: llama-cpp-python pld" in err


@pytest.mark.model  # the bundled model, on both backends
def test_the_saved_report_reads_back_and_renders_the_same(run):
    from decoders.bench.report import load_report, render_markdown
    from decoders.bench.report_pair import pair_line

    saved = run["dir"] / "report.json"
    report = load_report(saved)
    assert report.to_json() == json.loads(saved.read_text())
    assert render_markdown(report) + pair_line(saved.read_bytes()) == (run["dir"] / "report.md").read_text()


def test_labels_and_backends_parse():
    assert on_backend("pld[branches 3]", "llamacpp") == "pld[branches 3] [llama.cpp]"
    assert split_backend("pld[branches 3] [llama.cpp]") == ("pld[branches 3]", "llamacpp")
    assert split_backend("ar[again] [torch]") == ("ar[again]", "torch")
    assert split_backend("spec[tree 2x3]") == ("spec[tree 2x3]", None)
    assert parse_backends(" torch , llamacpp") == ("torch", "llamacpp")
    for text, message in (("torch", "two or more"), ("torch,torch", "named twice"), ("torch,cuda", "unknown backend"),
                          ("torch,,llamacpp", "has an empty item"), ("torch,llamacpp,", "has an empty item")):
        with pytest.raises(DecodeError, match=message):
            parse_backends(text)


@pytest.mark.parametrize("argv, message", [
    (["--backends", "torch"], "--backends compares two or more backends"),
    (["--backends", "torch,llamacpp", "--backend", "llamacpp"], "give either --backend NAME or --backends LIST"),
    (["--backends", "torch,llamacpp", "--sweep", "k=1..2"], "--sweep and --backends do not go together"),
    (["--backends", "torch,llamacpp", "--main", "HuggingFaceTB/SmolLM2-135M-Instruct"],
     "--backend llamacpp runs GGUF files"),
])
def test_bad_backends_are_refused_before_a_model_loads(tmp_path, capsys, argv, message):
    prompts = tmp_path / "one.jsonl"
    prompts.write_text(json.dumps(PROMPTS[0]) + "\n")
    code = main(["bench", "--prompts", str(prompts), "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    assert code != 0 and message in err


def test_where_the_ars_part_each_sides_top2_margin_is_kept_and_shown():
    """`agreement` on two tiny families (no bundled model): outputs that part at token 2 get each
    side's two best tokens and their margin after the prompt and the two shared tokens."""
    from types import SimpleNamespace

    import torch

    from decoders.backends.runner import KVRunner
    from decoders.bench.measure import OursEntry, Sample
    from decoders.bench.multi import Lane, agreement
    from decoders.bench.report import agreement_table
    from tests.support.engine import tiny_family

    families = {"torch": tiny_family(fast=False, helper_noise=None), "llamacpp": tiny_family(fast=True,
                                                                                               helper_noise=None)}
    prompt = [3, 4, 5]

    def sample(backend, ids):
        entry = OursEntry(label="ar", tokens=len(ids), wall_ms=1.0, ms_per_token=1.0, target_forwards=len(ids),
                          tau=1.0, finish="length", identical=True, first_divergence=None, decode_step_ms=None,
                          ids=ids)
        return Sample(7, "writing", "multi_turn", 0, len(prompt), ours={"ar": entry}, backend=backend)

    lanes = [Lane(b, f, None, [], [], None, samples=[sample(b, ids)])  # type: ignore[arg-type]
             for (b, f), ids in zip(families.items(), ([9, 10, 11, 12], [9, 10, 20]), strict=True)]
    found = agreement(lanes, {7: {"torch": prompt, "llamacpp": prompt}})
    assert len(found) == 1
    a = found[0]
    assert (a.identical, a.first_divergence, a.tokens, a.chosen) == (False, 2, [4, 3], [11, 20])
    for family, top2, margin in zip(families.values(), a.top2, a.margin, strict=True):
        logits = KVRunner(family.main).run(prompt + [9, 10])[-1]
        values, ids = torch.topk(logits, 2)
        assert top2 == ids.tolist() and margin == pytest.approx(float(values[0] - values[1]), abs=1e-3)
    same = agreement(lanes[:1] * 2, {7: {"torch": prompt}})
    assert same[0].identical and same[0].margin == []

    sides = {b: SimpleNamespace(backend=b, label=shown) for b, shown in BACKENDS.items()}
    report = SimpleNamespace(settings=SimpleNamespace(repeats=1), agreements=found, sides=sides)  # what the table reads
    table = agreement_table(report)  # type: ignore[arg-type]
    assert "identical on 0/1 prompt runs" in table
    assert "| q7 | writing | 4 / 3 | parts at token 2" in table
    assert f"{a.margin[0]:.3f} ({a.top2[0][0]} > {a.top2[0][1]})" in table
