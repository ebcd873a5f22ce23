"""Variants of a method as rows of their own in `tui-decode bench` (tiny random models, seconds)."""

from __future__ import annotations

import json

import pytest

from decoders.bench import load_prompts, parse_variants, run_bench
from decoders.bench.drafts import Drafts, default_variants
from decoders.bench.reference import reference_for
from decoders.bench.report import render_markdown
from decoders.bench.variants import MAX_VARIANTS
from decoders.core.errors import DecodeError
from decoders.models.drafts import EarlyExit
from decoders.models.family import FamilySpec, load_family
from tests.support.threads import torch_threads
from tests.support.tiny import save_tiny_model
from tui_decode.cli.main import main

PROMPTS = [
    {"question_id": 81, "category": "writing", "turns": ["w5 w6 w7 w8 w5 w6 w7 w8 w5 w6"]},
    {"question_id": 481, "category": "rag", "turns": ["w9 w10 w11 w12 w9 w10 w11 w12 w9"]},
]
QUICK = dict(max_new_tokens=8, record_overhead_every=0, bandwidth_bytes=1 << 22, warm_up=False)


@pytest.fixture(scope="module")
def tiny_family(tmp_path_factory):
    """A 2-layer tiny Llama with no helper: it offers an early exit and an int4 self-draft."""
    folder = save_tiny_model(tmp_path_factory.mktemp("variants") / "model", layers=2)
    return load_family(FamilySpec(name="t", main=str(folder), device="cpu"))


@pytest.fixture(scope="module")
def prompts(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "two.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return str(path)


@pytest.fixture(scope="module")
def two_spec_rows(tiny_family, prompts):
    """Speculative decoding with each self-draft, and linear prompt lookup beside its branches."""
    variants = parse_variants("spec[int4],spec[early-exit],pld,pld[branches 3]")
    with torch_threads(1):  # a module fixture is set up before the tests' one thread
        return run_bench(tiny_family, load_prompts(prompts), methods=(), variants=variants, **QUICK).to_json()


def test_labels_are_stable_and_canonical():
    labels = [v.label for v in parse_variants(
        "spec[int4], spec[early-exit], spec[tree=2x3], spec[tree 2x3; int4], pld[B=3], lookahead[W 5, N 4], jacobi")]
    assert labels == ["spec[int4]", "spec[early-exit]", "spec[tree 2x3]", "spec[int4, tree 2x3]", "pld[branches 3]",
                      "lookahead[window 5, ngram_size 4]", "jacobi"]
    assert [v.label for v in parse_variants(",".join(labels))] == labels  # a label selects its row again
    assert parse_variants("pld[branches 3]")[0].to_json() == {
        "label": "pld[branches 3]", "method": "pld", "params": {"branches": 3}, "draft": None, "layer": None}


def test_two_variants_of_one_method_are_two_rows(two_spec_rows):
    report = two_spec_rows
    rows = ["spec[int4]", "spec[early-exit]", "pld", "pld[branches 3]"]
    assert report["settings"]["methods"] == ["ar"] + rows
    assert [v["label"] for v in report["settings"]["variants"]] == rows
    by_label = {v["label"]: v for v in report["settings"]["variants"]}
    assert by_label["spec[int4]"]["draft"] == "int4" and by_label["spec[int4]"]["draft_source"] == "int4 self-draft"
    assert by_label["spec[early-exit]"]["draft_source"] == "early exit @ layer 1"
    assert by_label["pld[branches 3]"]["params"] == {"branches": 3}
    assert by_label["spec[int4]"]["transformers_counterpart"] is None
    assert by_label["spec[early-exit]"]["transformers_counterpart"].startswith("generate(assistant_early_exit=1,")
    for label in rows:
        ours = report["overall"][label]["ours"]
        assert ours["identical"] == 2 and ours["all_identical"] is True, label
        for key in ("tau", "speedup"):
            assert ours[key] is not None, (label, key)
        for sample in report["samples"]:  # checked against AR on every prompt, row by row
            entry = sample["ours"][label]
            assert entry["identical"] == (entry["ids"] == sample["ours"]["ar"]["ids"])
    for label in ("spec[int4]", "spec[early-exit]"):
        ours = report["overall"][label]["ours"]
        for key in ("acceptance", "c_hat", "alpha_hat", "predicted_speedup", "predicted_speedup_cost_aware", "speedup_spread"):
            assert ours[key] is not None, (label, key)
    # the two drafts differ: the int4 copy of the whole model agrees more often than one layer of two
    assert report["overall"]["spec[int4]"]["ours"]["acceptance"] != report["overall"]["spec[early-exit]"]["ours"][
        "acceptance"]
    assert "theirs" not in report["overall"]["spec[int4]"]
    assert report["overall"]["spec[early-exit]"]["theirs"]["tau"] is not None
    # pld[branches 3] is measured beside transformers' closest call, shared with the pld row
    for sample in report["samples"]:
        assert sample["theirs"]["pld[branches 3]"]["ids"] == sample["theirs"]["pld"]["ids"]
    keys = {t["key"] for t in report["targets"]}
    assert {"spec_thm38:spec[int4]", "spec_thm38:spec[early-exit]", "pld[branches 3]_vs_pld"} <= keys

    md = render_markdown(report)
    for row in ("| Speculative [int4] |", "| Speculative [early-exit] |", "| Prompt lookup |",
                "| Prompt lookup [branches 3] |"):
        assert row in md
    spec_rows = [line for line in md.splitlines() if line.startswith("| Speculative [int4] | overall |")]
    assert len(spec_rows) == 1 and spec_rows[0].endswith("| yes (2/2) | no counterpart |")
    assert "| spec[int4] | spec | – | int4 self-draft | no counterpart |" in md


def test_the_int4_draft_is_built_once_and_only_when_a_row_needs_it(tiny_family, prompts, monkeypatch):
    import decoders.models.backend_choice as family_module

    built = []
    real = family_module.quantized_draft
    monkeypatch.setattr(family_module, "quantized_draft", lambda *a: built.append(a) or real(*a))
    run_bench(tiny_family, load_prompts(prompts), methods=(), variants=parse_variants("pld[branches 2]"), **QUICK)
    assert built == []
    report = run_bench(tiny_family, load_prompts(prompts), methods=(),
                       variants=parse_variants("spec[int4],spec[int4, tree 2x3]"), **QUICK).to_json()
    assert len(built) == 1
    assert report["overall"]["spec[int4, tree 2x3]"]["ours"]["all_identical"] is True
    assert not any(t["key"] == "spec_thm38:spec[int4, tree 2x3]" for t in report["targets"])  # no linear draft


def test_a_variant_that_leaves_autoregressive_is_flagged_on_its_own(tiny_family, prompts, monkeypatch):
    """Break the branches' decoder only (its last token moved): pld[branches 3] is flagged, pld
    beside it is not, and the report says where each output left the baseline."""
    import decoders.methods.shared.lookup_tree as lookup_tree

    real = lookup_tree.prompt_lookup_tree

    def broken(ctx):
        run = yield from real(ctx)
        run.ids[-1] = (run.ids[-1] + 1) % 64
        return run

    monkeypatch.setattr(lookup_tree, "prompt_lookup_tree", broken)
    report = run_bench(tiny_family, load_prompts(prompts), methods=(),
                       variants=parse_variants("pld,pld[branches 3]"), **QUICK).to_json()
    assert report["overall"]["pld"]["ours"]["all_identical"] is True
    flagged = report["overall"]["pld[branches 3]"]["ours"]
    assert flagged["identical"] == 0 and flagged["all_identical"] is False
    for sample in report["samples"]:
        entry = sample["ours"]["pld[branches 3]"]
        assert entry["identical"] is False and entry["first_divergence"] == len(entry["ids"]) - 1
    md = render_markdown(report)
    assert "| Prompt lookup [branches 3] |" in md and "| no (0/2) |" in md
    assert f"≠AR@{len(entry['ids']) - 1}" in md


def test_default_rows_follow_what_the_family_offers(tiny_family, tmp_path):
    notes: list[str] = []
    drafts = Drafts(tiny_family, reference_for(tiny_family))
    labels = [v.label for v in default_variants(tiny_family, drafts, notes)]
    assert labels == ["spec[early-exit]", "spec[int4]", "spec[int4, tree 2x3]", "pld", "pld[branches 3]",
                      "jacobi", "lookahead", "suffix"]
    assert notes == []

    from tests.support.quantized import peaked_model

    folder = save_tiny_model(tmp_path / "odd", model=peaked_model(intermediate_size=40))
    odd = load_family(FamilySpec(name="odd", main=str(folder), draft=EarlyExit(layer=1), device="cpu"))
    notes = []
    labels = [v.label for v in default_variants(odd, Drafts(odd, reference_for(odd)), notes)]
    assert labels[:2] == ["spec", "spec[tree 2x3]"]  # its own early exit, then its tree
    assert "spec[int4]" not in labels
    assert len(notes) == 1 and notes[0].startswith("spec[int4] is not in the default rows:") and "down_proj" in notes[0]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("variants,message", [
    ("spec[int4", "a '[' is never closed"),
    ("pld[branches 99]", "branches must be an integer in 1..16, got 99"),
    ("spec[tree 9x3]", "tree_width must be an integer in 1..8, got 9"),
    ("spec[tree 2x99]", "tree_depth must be an integer in 1..32, got 99"),
    ("spec[early-exit 99999]", "the early-exit layer must be an integer in 1..1024, got 99999"),
    ("spec[tree two]", "write the tree as tree WxD"),
    ("pld[gamma 3]", "prompt lookup decoding has no item 'gamma'"),
    ("jacobi[int4]", "jacobi decoding drafts with no helper"),
    ("warp[int4]", "unknown method 'warp' in variant"),
    ("pld,pld", "variant pld is listed twice"),
    ("pld[ngram_min 5]", "variant pld[ngram_min 5]: ngram_min (5) is larger than ngram_max (3)"),
    (",".join(f"pld[branches {b}]" for b in range(1, MAX_VARIANTS + 2)), f"at most {MAX_VARIANTS}"),
    (" , ", "no variants given"),
])
def test_bad_variants_are_one_line_and_exit_2_before_the_model_loads(capsys, prompts, variants, message):
    code, out, err = run_cli(capsys, "bench", "--prompts", prompts, "--main", "/nonexistent/model",
                             "--variants", variants)
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and "/nonexistent" not in err
    assert out == ""


def test_variants_and_a_sweep_do_not_go_together(capsys, prompts):
    code, out, err = run_cli(capsys, "bench", "--prompts", prompts, "--main", "/nonexistent/model",
                             "--variants", "pld[branches 2]", "--sweep", "gamma=1..2")
    assert code == 2 and "--sweep and --variants do not go together" in err and err.count("\n") == 1


def test_an_early_exit_layer_past_the_model_is_skipped_with_a_note(tiny_family, prompts):
    report = run_bench(tiny_family, load_prompts(prompts), methods=(), limit=1,
                       variants=parse_variants("spec[early-exit 5],pld"), **QUICK).to_json()
    assert report["settings"]["methods"] == ["ar", "pld"]
    assert any(n.startswith("spec[early-exit 5] skipped: the early-exit layer must be in 1..1") for n in report["notes"])


def test_variants_reach_the_report_through_the_cli(capsys, prompts, tiny_family, tmp_path):
    code, out, err = run_cli(capsys, "bench", "--prompts", prompts, "--main", tiny_family.main_source, "--limit", "1",
                             "--variants", "spec[early-exit],pld[branches 2]", "--record-overhead-every", "0",
                             "--max-new-tokens", "8", "--bandwidth-mb", "4", "--out", str(tmp_path / "out"))
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["settings"]["methods"] == ["ar", "spec[early-exit]", "pld[branches 2]"]
    assert "| Speculative [early-exit] |" in out and "| Prompt lookup [branches 2] |" in out
    assert "[1/1] q81 writing: ours spec[early-exit]" in err


def test_parse_errors_name_the_variant():
    with pytest.raises(DecodeError, match=r"bad variant 'pld\[k 0\]': num_pred must be an integer in 1..64"):
        parse_variants("pld[k 0]")


def test_a_registered_method_declares_its_counterpart_its_shape_and_when_it_drafts_a_chain(tiny_family, prompts):
    """The test-only method declares transformers' counterpart (prompt lookup with its span),
    a two-parameter variant item and which of its rows draft one chain; the bench reads all three
    from the declaration: the call, a run of it beside each row, and a closest-only note."""
    from decoders.bench.targets import is_tree
    from decoders.bench.variants import parse_variant, shape_items
    from decoders.core.declarations import Counterpart, Method, ParamSpec, Shape, register, unregister
    from tests.support.lookback import SPAN, lookback

    reach = ParamSpec("reach", "reach", "lookback: a second integer, for the shape item", 1, low=1, high=4)
    register(Method(
        name="lookback", label="Lookback", run=lookback, params=(SPAN, reach), greedy_only=True, detail="echo",
        draft_length="span", shapes=(Shape("grid", "span", "reach", letters="SxR"),),
        linear=lambda p: p.reach == 1,
        counterpart=Counterpart(lambda p, assistant: f"transformers prompt lookup (k={p.span})",
                                options=lambda p: {"prompt_lookup_num_tokens": p.span, "max_matching_ngram_size": 1})))
    try:
        assert parse_variant("lookback[grid 3x2]").overrides == (("span", 3), ("reach", 2))
        assert parse_variant("lookback[span=3, reach=2]").label == "lookback[grid 3x2]" and "grid SxR" in shape_items()
        with pytest.raises(DecodeError, match="write the grid as grid SxR"):
            parse_variant("lookback[grid 3]")
        assert is_tree("lookback[grid 3x2]") and not is_tree("lookback[span 3]")

        variants = parse_variants("lookback,lookback[grid 3x2]")
        with torch_threads(1):
            report = run_bench(tiny_family, load_prompts(prompts), methods=(), variants=variants, **QUICK).to_json()
        call = "generate(prompt_lookup_num_tokens=2, max_matching_ngram_size=1)"
        assert report["settings"]["transformers_counterparts"]["lookback"] == call
        grid = next(v for v in report["settings"]["variants"] if v["label"] == "lookback[grid 3x2]")
        assert grid["transformers_counterpart"] == call.replace("=2,", "=3,") and grid["counterpart_is_closest"]
        assert any(note.startswith("lookback[grid 3x2]: transformers verifies one linear draft") for note in
                   report["notes"])
        theirs = report["samples"][0]["theirs"]["lookback"]
        assert theirs["label"] == "transformers prompt lookup (k=2)" and 1 <= len(theirs["ids"]) <= 8
        assert report["overall"]["lookback"]["theirs"]["tau"] is not None
    finally:
        unregister("lookback")
