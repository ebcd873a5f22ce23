"""The batch bench (`tui-decode bench --batch`): T(B, k) measured and saved, each method beside
autoregressive decoding at the same batch size, the crossover, the report of kind "batch" read
back, and bad batch sizes refused in one line. Tiny models, seconds."""

from __future__ import annotations

import json

import pytest

from decoders.backends.batched import BatchedLM
from decoders.bench.batch import BatchRow, check_memory, crossover, parse_batches
from decoders.bench.batch_surface import measure_surface
from decoders.bench.files import load_report
from decoders.core.errors import DecodeError
from tests.support.engine import peaked_model
from tests.support.tiny import save_tiny_model
from tui_decode.cli.main import main as cli_main


def test_the_surface_is_each_shapes_time_over_one_position_of_one_sequence(monkeypatch):
    now = [0.0]
    real_step = BatchedLM.step

    def step(self, new):  # a forward that takes B * k + 1 units
        now[0] += len(new) * max(len(row) for row in new) + 1
        return real_step(self, new)

    monkeypatch.setattr(BatchedLM, "step", step)
    surface, unit = measure_surface(peaked_model(), [5, 6, 7, 8], batches=(2, 4), widths=3, repeats=2,
                                    clock=lambda: now[0])
    assert unit == 2000.0  # one position of one sequence: 2 units, in ms
    assert surface == {2: [1.5, 2.5, 3.5], 4: [2.5, 4.5, 6.5]}  # (B * k + 1) / 2


def row(method: str, batch: int, speedup: float) -> BatchRow:
    return BatchRow(method=method, batch=batch, throughput=1.0, latency_s=1.0, ar_throughput=1.0, speedup=speedup,
                    spread=None, forwards=1, accepted_per_forward=1.0, identical=True)


def test_the_crossover_is_the_first_batch_size_that_does_not_pay():
    assert crossover([row("pld", 1, 1.4), row("pld", 2, 1.1), row("pld", 4, 0.9), row("pld", 8, 1.01),
                      row("pld", 16, 0.8)]) == \
        "stops paying at batch 4"
    assert crossover([row("pld", 1, 1.4), row("pld", 2, 1.1)]) == "pays at every batch size measured (up to 2)"
    assert crossover([row("pld", 1, 0.8)]) == "pays at no batch size measured (from 1)"


@pytest.mark.parametrize("text,line", [
    ("0", "batch size must be 1..64, got 0; give --batch sizes in that range (e.g. 1,2,4,8)"),
    ("1,65", "batch size must be 1..64, got 65; give --batch sizes in that range (e.g. 1,2,4,8)"),
    ("1,two", "--batch takes comma-separated batch sizes such as 1,2,4, got '1,two'"),
])
def test_a_bad_batch_size_is_one_line(text, line):
    with pytest.raises(DecodeError) as err:
        parse_batches(text)
    assert str(err.value) == line


def test_a_batch_above_what_memory_allows_says_what_it_needs():
    with pytest.raises(DecodeError) as err:
        check_memory(peaked_model(), [1, 64], prompt_tokens=100, max_new=64, width=11, vocab=64,
                     available=4_000_000)
    assert str(err.value).startswith("batch size 64 needs about ")
    assert "more than half of the 4.0 MB available; give smaller --batch sizes or lower --max-new-tokens" in \
        str(err.value)
    check_memory(peaked_model(), [1, 2], prompt_tokens=100, max_new=64, width=11, vocab=64, available=4_000_000)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("batch") / "model")


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    lines = [{"question_id": i, "category": "writing", "turns": [f"w{5 + i} w6 w7 w8 w{5 + i} w6 w7"]} for i in range(4)]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    return path


def test_the_batch_bench_writes_its_rows_and_the_surface(tiny_folder, prompts, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--batch", "1,2",
                     "--max-new-tokens", "8", "--num-pred", "4", "--threads", "1", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    assert data["kind"] == "batch" and data["settings"]["batches"] == [1, 2]
    assert sorted(data["surface"]) == ["1", "2"] and len(data["surface"]["2"]) == 16
    assert data["surface"]["1"][0] == 1.0
    assert [(r["method"], r["batch"]) for r in data["rows"]] == [("ar", 1), ("pld", 1), ("ar", 2), ("pld", 2)]
    assert all(r["identical"] for r in data["rows"]) and data["divergences"] == []
    assert set(data["crossover"]) == {"pld"}
    assert data["machine"]["threads"] == 1 and "load_before" in data["machine"]
    report = load_report(out / "report.json")
    assert report.kind == "batch"
    assert "| pld | 2 |" in printed and "T(B, k)" in printed


def test_the_batch_bench_runs_suffix_decoding_beside_prompt_lookup(tiny_folder, prompts, tmp_path, capsys):
    """`bench --batch 1,2 --methods ar,pld,suffix`: a suffix row at each batch size, its k its
    --suffix-max, every sequence equal to its batch-1 output; a variant sets its k."""
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--batch", "1,2",
                     "--methods", "ar,pld,suffix", "--variants", "pld,suffix,suffix[suffix_max 2, draft_policy fixed]",
                     "--max-new-tokens", "8", "--num-pred", "4", "--suffix-max", "6", "--threads", "1",
                     "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    labels = ["ar", "pld", "suffix", "suffix[suffix_max 2, draft_policy fixed]"]
    assert [(r["method"], r["batch"]) for r in data["rows"]] == [(m, b) for b in (1, 2) for m in labels]
    assert all(r["identical"] for r in data["rows"]) and data["divergences"] == []
    by = {(r["method"], r["batch"]): r for r in data["rows"]}
    assert by[("suffix", 2)]["k"] == 6 and by[("pld", 2)]["k"] == 4
    assert by[("suffix[suffix_max 2, draft_policy fixed]", 2)]["k"] == 2
    assert all(k <= 2 for k in by[("suffix[suffix_max 2, draft_policy fixed]", 2)]["draft_lengths"])
    assert set(data["crossover"]) == set(labels[1:])
    assert "| suffix | 2 |" in printed and data["notes"] == []


@pytest.fixture(scope="module")
def helper_folder(tmp_path_factory):
    from tests.support.tiny import perturbed_copy, tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("batch") / "helper", model=perturbed_copy(tiny_model(), 0.1, seed=1))


@pytest.mark.parametrize("draft", ["helper", "int4"])
def test_the_batch_bench_runs_spec_beside_autoregressive(tiny_folder, helper_folder, prompts, tmp_path, capsys,
                                                         draft):
    out = tmp_path / "out"
    flags = ["--helper", str(helper_folder)] if draft == "helper" else ["--self-draft", "int4"]
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), *flags,
                     "--batch", "1,3", "--methods", "ar,spec", "--max-new-tokens", "8", "--num-pred", "3",
                     "--threads", "1", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    assert [(r["method"], r["batch"]) for r in data["rows"]] == [("ar", 1), ("spec", 1), ("ar", 3), ("spec", 3)]
    assert all(r["identical"] for r in data["rows"]) and data["divergences"] == []
    spec3 = data["rows"][3]
    assert spec3["accepted_per_forward"] > 1.0  # the helper's drafts were accepted, several tokens per forward
    assert set(data["crossover"]) == {"spec"} and "| spec | 3 |" in printed


def test_the_batch_bench_runs_spec_drafting_with_a_trained_head(tiny_folder, prompts, tmp_path, capsys):
    from tests.support.heads import write_head

    write_head(tmp_path / "head", "eagle1")  # a head for the two-layer tiny model (EAGLE-3's reads layers 1..3)
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--self-draft", "head",
                     "--head", str(tmp_path / "head"), "--batch", "1,2,4", "--methods", "ar,spec",
                     "--max-new-tokens", "8", "--num-pred", "3", "--threads", "1", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    assert [(r["method"], r["batch"]) for r in data["rows"]] == [
        ("ar", 1), ("spec", 1), ("ar", 2), ("spec", 2), ("ar", 4), ("spec", 4)]
    assert all(r["identical"] for r in data["rows"]) and data["divergences"] == []
    assert data["family"]["draft"]["kind"] == "head"
    assert set(data["crossover"]) == {"spec"} and "| spec | 4 |" in printed


def test_the_adaptive_row_runs_beside_fixed_k_rows_and_saves_its_k_per_iteration(tiny_folder, prompts, tmp_path,
                                                                                    capsys):
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--batch", "1,2",
                     "--max-new-tokens", "8", "--threads", "1", "--out", str(out), "--variants",
                     "pld[num_pred 2, draft_policy fixed],pld[num_pred 4, draft_policy fixed],pld[num_pred 4]"])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    labels = ["ar", "pld[num_pred 2, draft_policy fixed]", "pld[num_pred 4, draft_policy fixed]", "pld[num_pred 4]"]
    assert [r["method"] for r in data["rows"]] == labels * 2
    by = {(r["method"], r["batch"]): r for r in data["rows"]}
    assert all(r["identical"] for r in data["rows"]) and data["divergences"] == []
    for b in (1, 2):
        adaptive = by[("pld[num_pred 4]", b)]
        assert adaptive["policy"] == "adaptive" and adaptive["k"] == 4
        # one K per iteration after the prefill, each within the cap
        assert len(adaptive["draft_lengths"]) == adaptive["forwards"] - 1
        assert all(0 <= k <= 4 for k in adaptive["draft_lengths"])
        fixed = by[("pld[num_pred 2, draft_policy fixed]", b)]
        assert fixed["policy"] == "fixed" and fixed["k"] == 2 and max(fixed["draft_lengths"]) <= 2
    assert data["settings"]["draft_policy"] == "adaptive"
    assert "| pld[num_pred 2, draft_policy fixed] | 2 |" in printed and "| ≤2 |" in printed
    assert "## Draft length per iteration" in printed and "- pld[num_pred 4] at batch 2: " in printed
    assert load_report(out / "report.json").rows[-1].draft_lengths == by[("pld[num_pred 4]", 2)]["draft_lengths"]


@pytest.mark.parametrize("flags,line", [
    (["--batch", "2", "--variants", "pld[branches 3]"],
     "--batch varies only num_pred, suffix_max, draft_policy, not branches in pld[branches 3]; give e.g. --variants "
     "'pld[num_pred 2, draft_policy fixed],pld'"),
    (["--batch", "2", "--variants", "spec[int4]"],
     "--batch drafts spec with the loaded --helper, --self-draft int4 or --self-draft head, not with a variant's "
     "draft (spec[int4]); give --methods ar,spec and --self-draft int4"),
    (["--batch", "2", "--variants", "jacobi"], "--batch runs ar, pld, suffix, spec only so far, not jacobi"),
    (["--batch", "0"], "batch size must be 1..64, got 0"),
    (["--batch", "1,2", "--methods", "ar,jacobi"],
     "--batch runs ar, pld, suffix, spec only so far, not jacobi; give --methods ar,pld,suffix,spec"),
    (["--batch", "1,2", "--methods", "ar,spec"],
     "speculative decoding at batch > 1 needs a draft: load a helper model with --helper SRC or draft with "
     "--self-draft int4 or --self-draft head"),
    (["--batch", "1,2", "--methods", "ar,spec", "--self-draft-layer", "1"],
     "speculative decoding at batch > 1 drafts with a helper model, the int4 self-draft or a trained head only, not "
     "the early-exit draft; give --helper SRC, --self-draft int4 or --self-draft head, or drop spec from --methods"),
    (["--batch", "2", "--sweep", "num_pred=1..3"], "--batch and --sweep do not go together; drop one of the two"),
])
def test_bad_batch_bench_input_is_one_line(tiny_folder, prompts, tmp_path, capsys, flags, line):
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--out", str(tmp_path / "o"),
                     *flags])
    err = capsys.readouterr().err
    assert code == 2 and line in err and err.strip().count("\n") == 0, err


def test_the_reports_of_the_other_kinds_still_open():
    from tests.support.app import DATA

    assert load_report(DATA / "report_bench.json").kind == "bench"
    assert load_report(DATA / "report_sweep.json").kind == "sweep"


@pytest.mark.model  # the bundled model's int4 self-draft at batch B
def test_the_batch_bench_runs_the_int4_self_draft_on_the_bundled_model(tmp_path, capsys, monkeypatch):
    from functools import partial

    import decoders.bench.batch as batch

    monkeypatch.setattr(batch, "run_batch_bench", partial(batch.run_batch_bench, surface_widths=2, surface_repeats=1))
    path = tmp_path / "p.jsonl"
    turns = ["Say this twice: red fox, blue fox. red fox, blue fox.", "What is the capital of France?"]
    path.write_text("\n".join(json.dumps({"question_id": i, "category": "qa", "turns": [t]}) for i, t in enumerate(turns)))
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(path), "--main", "bundled", "--self-draft", "int4", "--batch", "1,2",
                     "--methods", "ar,spec", "--max-new-tokens", "12", "--num-pred", "3", "--threads", "1",
                     "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    assert [(r["method"], r["batch"]) for r in data["rows"]] == [("ar", 1), ("spec", 1), ("ar", 2), ("spec", 2)]
    assert all(r["identical"] for r in data["rows"]), data["divergences"]
    assert data["rows"][3]["accepted_per_forward"] > 1.0 and "| spec | 2 |" in printed


@pytest.fixture
def llamacpp_prompts(tmp_path):
    path = tmp_path / "two.jsonl"
    lines = [{"question_id": 1, "category": "writing", "turns": ["Say this twice: red fox, blue fox. red fox, blue fox."]},
             {"question_id": 2, "category": "qa", "turns": ["What is the capital of France?"]}]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    return path


@pytest.mark.model  # the bundled GGUF on llama.cpp (its tokenizer read from the file)
def test_the_batch_bench_runs_on_the_llama_cpp_backend(llamacpp_prompts, tmp_path, capsys, monkeypatch):
    pytest.importorskip("llama_cpp")
    from functools import partial

    import decoders.bench.batch as batch

    # time, not bookkeeping: two widths of the surface, timed once (the 16 are checked on torch above)
    monkeypatch.setattr(batch, "run_batch_bench", partial(batch.run_batch_bench, surface_widths=2, surface_repeats=1))
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(llamacpp_prompts), "--backend", "llamacpp", "--main", "bundled",
                     "--batch", "1,2", "--max-new-tokens", "4", "--num-pred", "3", "--threads", "1", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    assert data["kind"] == "batch" and data["family"]["backend"] == "llamacpp"
    assert sorted(data["surface"]) == ["1", "2"] and data["surface"]["1"][0] == 1.0
    assert [(r["method"], r["batch"]) for r in data["rows"]] == [("ar", 1), ("pld", 1), ("ar", 2), ("pld", 2)]
    assert all(r["identical"] for r in data["rows"]) and data["divergences"] == []
    assert "| pld | 2 |" in printed


@pytest.mark.model
def test_a_batch_beyond_the_llama_cpp_context_is_one_line(llamacpp_prompts, tmp_path, capsys):
    pytest.importorskip("llama_cpp")
    code = cli_main(["bench", "--prompts", str(llamacpp_prompts), "--backend", "llamacpp", "--main", "bundled",
                     "--batch", "1,2", "--max-new-tokens", "8140", "--num-pred", "10", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().count("\n") == 0, err
    assert "positions (prompt, --max-new-tokens and a step's width), beyond the model's context of 8192; lower " \
        "--max-new-tokens or --num-pred" in err


@pytest.mark.model
def test_spec_at_batch_on_llama_cpp_without_a_gguf_helper_is_one_line(llamacpp_prompts, tmp_path, capsys):
    pytest.importorskip("llama_cpp")
    code = cli_main(["bench", "--prompts", str(llamacpp_prompts), "--backend", "llamacpp", "--main", "bundled",
                     "--batch", "1,2", "--methods", "ar,spec", "--max-new-tokens", "4", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().count("\n") == 0, err
    assert "speculative decoding at batch > 1 on llama.cpp needs a GGUF helper model: give --helper FILE.gguf (or " \
        "--helper bundled), or drop spec from --methods" in err


@pytest.mark.model  # the bundled GGUF on llama.cpp, its Q4_0 copy drafting
def test_the_batch_bench_runs_spec_on_llama_cpp_with_a_gguf_helper(llamacpp_prompts, q4_0_helper_gguf, tmp_path,
                                                                    capsys, monkeypatch):
    from functools import partial

    import decoders.bench.batch as batch

    monkeypatch.setattr(batch, "run_batch_bench", partial(batch.run_batch_bench, surface_widths=2, surface_repeats=1))
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(llamacpp_prompts), "--backend", "llamacpp", "--main", "bundled",
                     "--helper", str(q4_0_helper_gguf), "--batch", "1,2", "--methods", "ar,spec",
                     "--max-new-tokens", "8", "--num-pred", "3", "--threads", "1", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    assert data["family"]["backend"] == "llamacpp"
    assert [(r["method"], r["batch"]) for r in data["rows"]] == [("ar", 1), ("spec", 1), ("ar", 2), ("spec", 2)]
    assert all(r["identical"] for r in data["rows"]) and data["divergences"] == []
    assert data["rows"][3]["accepted_per_forward"] > 1.0 and "| spec | 2 |" in printed
    assert set(data["crossover"]) == {"spec"}


def test_a_batch_row_saved_before_the_adaptive_policy_still_opens():
    import msgspec

    old = {"method": "pld", "batch": 2, "throughput": 1.0, "latency_s": 1.0, "ar_throughput": 1.0, "speedup": 1.0,
           "spread": None, "forwards": 3, "accepted_per_forward": 1.0, "identical": True}
    row_ = msgspec.convert(old, BatchRow)
    assert (row_.policy, row_.k, row_.draft_lengths) == ("fixed", 0, [])
