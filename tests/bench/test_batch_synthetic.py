"""Synthetic acceptance at batch B (`decoders.bench.batch_synthetic`, `bench --batch --synthetic-grid`):
each sequence keeps its batch-1 output, the target accepts the given share of the drafted
positions, the draft costs its share of the batch's step, and the cells sit in rows of their own
beside the cost-aware Theorem 3.8 at T(B, k) measured at that batch size. Tiny models, seconds."""

from __future__ import annotations

import json
import math

import pytest

from decoders.analysis.finite import finite_speedup, surface_cost
from decoders.analysis.theory import chain_speedup
from decoders.backends.batched import BatchedLM
from decoders.bench.batch_synthetic import (
    SyntheticBatchDraft,
    SyntheticGrid,
    cell_seeds,
    measure_synthetic,
    parse_grid,
    synthetic_section,
)
from decoders.bench.files import load_report
from decoders.core.errors import DecodeError
from decoders.methods.batch.chain import decode_batch
from tests.support.tiny import save_tiny_model, tiny_model
from tui_decode.cli.main import main as cli_main

PROMPTS = [[5, 6, 7, 8, 5, 6, 7], [9, 10, 11, 9, 10], [12, 13, 14, 15, 16, 12], [20, 21, 22, 23]]


@pytest.fixture(scope="module")
def model():
    return tiny_model(max_positions=256)


def reference(model, prompt: list[int], max_new: int) -> list[int]:
    return decode_batch(BatchedLM(model), [prompt], max_new, "ar").rows[0].out


def synthetic_run(model, prompts, alpha: float, gamma: int, max_new: int, seed: int = 0, cost: float = 0.0,
                  step_s: float = 0.0, wait=None):
    refs = [reference(model, p, max_new) for p in prompts]
    draft = SyntheticBatchDraft(refs, alpha, gamma, cost, step_s, vocab=64, seeds=[seed + i for i in range(len(prompts))],
                                wait=wait)
    run = decode_batch(BatchedLM(model), prompts, max_new, "synthetic", draft=draft)
    return refs, draft, run


@pytest.mark.parametrize("alpha", [0.3, 0.7])
def test_every_sequence_keeps_its_batch_1_output_and_the_target_accepts_the_given_share(model, alpha):
    prompts = PROMPTS * 2  # 8 rows, two of each prompt, each drawing from its own seed
    refs, draft, run = synthetic_run(model, prompts, alpha, gamma=4, max_new=96)
    assert [row.out for row in run.rows] == refs
    assert draft.parted == 0
    # each judged position is one draw right with probability alpha: the accepted share within
    # four binomial standard errors of it (seeded: the same share on every run)
    assert draft.judged > 400
    bound = 4 * math.sqrt(alpha * (1 - alpha) / draft.judged)
    assert abs(draft.accepted / draft.judged - alpha) < bound
    assert sum(row.accepted for row in run.rows) == draft.accepted  # the tally is what the target accepted


def test_acceptance_one_and_zero_are_every_draft_and_none(model):
    _, always, run = synthetic_run(model, PROMPTS, 1.0, gamma=3, max_new=40)
    assert always.accepted == always.judged > 0
    assert all(row.accepted == row.drafted for row in run.rows)
    refs, never, run = synthetic_run(model, PROMPTS, 0.0, gamma=3, max_new=40)
    # each iteration that drafts is judged at its first position only: all but the prefill and the
    # last token's (a budget of none left to draft)
    assert never.accepted == 0 and never.judged == sum(row.iterations - 2 for row in run.rows)
    assert [row.out for row in run.rows] == refs


def test_the_batch_pays_its_share_of_a_step_per_position_of_its_longest_chain(model):
    waits: list[float] = []
    _, draft, run = synthetic_run(model, PROMPTS, 0.6, gamma=5, max_new=24, cost=0.25, step_s=0.004,
                                  wait=waits.append)
    assert waits == pytest.approx([width * 0.25 * 0.004 for width in run.draft_lengths])
    assert draft.charged == sum(run.draft_lengths)


def test_the_prediction_uses_the_verify_cost_measured_at_that_batch_size(model):
    surface = {1: [1.0, 1.5, 2.0], 2: [2.0, 8.0, 9.0]}  # T(2, 2) / T(2, 1) = 4; at batch 1 it would be 1.5
    refs = {i: reference(model, p, 12) for i, p in enumerate(PROMPTS)}
    grid = SyntheticGrid(alphas=[0.5], gammas=[1, 2], cost=0.1)
    rows, parted = measure_synthetic(lambda rows: BatchedLM(model), PROMPTS, 2, grid, rounds=2, max_new=12,
                                     ref=refs.__getitem__, surface=surface, unit_ms=1.0, vocab=64,
                                     stop_ids=frozenset(), wait=lambda seconds: None)
    assert parted == [] and all(row.identical for row in rows)
    assert [(r.label, r.batch, r.alpha, r.gamma) for r in rows] == [("synthetic α=0.5 γ=1", 2, 0.5, 1),
                                                                    ("synthetic α=0.5 γ=2", 2, 0.5, 2)]
    assert rows[0].verify_cost == 4.0 and rows[1].verify_cost == 4.5
    assert rows[0].predicted == round(chain_speedup([0.5], 1, 0.1, 4.0), 3)
    assert rows[1].predicted == round(chain_speedup([0.5], 2, 0.1, 4.5), 3)
    assert rows[0].ratio == pytest.approx(rows[0].decode_speedup / rows[0].predicted, rel=1e-2)
    assert all(r.synthetic and r.judged > 0 for r in rows)
    assert rows[0].expected_tokens == 1.5 and rows[1].expected_tokens == 1.75  # 1 + α (+ α²)
    assert 1.0 <= rows[0].row_tokens <= 2.0 and rows[0].stretch >= 1.0  # the batch waits for its slowest row
    # what the run does: 11 tokens per row after the prefill, its forwards at T(B', k) of the surface
    for r in rows:
        exact = finite_speedup(11, 0.5, r.gamma, 0.1, 2, surface_cost(surface))
        assert r.predicted_finite == round(exact, 3)
        assert r.ratio_finite == pytest.approx(r.decode_speedup / r.predicted_finite, rel=1e-2)
        assert r.predicted_finite_at_alpha_hat == round(finite_speedup(11, r.alpha_hat, r.gamma, 0.1, 2,
                                                                       surface_cost(surface)), 3)
    lines = synthetic_section(rows)
    assert "| predicted (finite) | measured / finite prediction |" in lines[4]
    assert f"| {rows[0].predicted_finite:.3f}x | {rows[0].ratio_finite:.3f} |" in lines[6]
    assert lines[-1].startswith("- synthetic at batch 2: measured / finite prediction within 10% in ")


def test_every_cell_round_and_row_draws_from_its_own_seed(model):
    seeds = [seed for cell in range(6) for round_ in range(3) for seed in cell_seeds(7, cell, round_, 3, 4)]
    assert len(set(seeds)) == len(seeds) == 6 * 3 * 4
    assert cell_seeds(7, 0, 0, 3, 4)[0] == 7  # the first row of the first cell draws as batch 1 with the seed
    # the cells of a grid draw differently: at one α two cells of the same γ would share every draw
    refs = {i: reference(model, p, 24) for i, p in enumerate(PROMPTS[:1])}
    grid = SyntheticGrid(alphas=[0.5, 0.5000001], gammas=[4], cost=0.0)
    surface = {1: [1.0] * 6}
    made: list[tuple] = []  # each draft's first row's draws, as it was made
    original = SyntheticBatchDraft.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self.rngs[0].getstate())

    SyntheticBatchDraft.__init__ = spy
    try:
        measure_synthetic(lambda rows: BatchedLM(model), PROMPTS[:1], 1, grid, rounds=2, max_new=24,
                          ref=refs.__getitem__, surface=surface, unit_ms=1.0, vocab=64, stop_ids=frozenset(),
                          wait=lambda seconds: None)
    finally:
        SyntheticBatchDraft.__init__ = original
    assert len(made) == 4  # two cells, two rounds
    assert len(set(made)) == 4  # no two drafts of the grid start from the same draws


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("batchsyn") / "model")


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    lines = [{"question_id": i, "category": "writing", "turns": [f"w{5 + i} w6 w7 w8 w{5 + i} w6 w7"]} for i in range(4)]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    return path


def test_the_grid_runs_in_rows_of_its_own_beside_the_real_ones(tiny_folder, prompts, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--batch", "1,2", "--methods",
                     "ar,pld", "--synthetic-grid", "0.9,0.5:1,3", "--synthetic-cost", "0.05", "--max-new-tokens", "8",
                     "--threads", "1", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads((out / "report.json").read_text())
    assert [(r["method"], r["batch"]) for r in data["rows"]] == [("ar", 1), ("pld", 1), ("ar", 2), ("pld", 2)]
    assert set(data["crossover"]) == {"pld"}  # the synthetic cells are no method
    cells = [(r["label"], r["batch"]) for r in data["synthetic"]]
    assert cells == [(f"synthetic α={a} γ={g}", b) for b in (1, 2) for a in ("0.5", "0.9") for g in (1, 3)]
    for r in data["synthetic"]:
        curve = data["surface"][str(r["batch"])]
        assert r["synthetic"] and r["cost"] == 0.05 and r["identical"]
        assert r["verify_cost"] == pytest.approx(curve[r["gamma"]] / curve[0], abs=1e-3)
        # each figure is saved rounded to 3 decimals: those of the tiny model's noisy timing may be small
        assert r["predicted"] == pytest.approx(chain_speedup([r["alpha"]], r["gamma"], 0.05, r["verify_cost"]),
                                               rel=1e-2)
        assert r["ratio"] == pytest.approx(r["decode_speedup"] / r["predicted"], rel=1e-2)
        # the finite prediction: 7 tokens after the prefill per row, T(B', k) of the saved surface
        finite = finite_speedup(7, r["alpha"], r["gamma"], 0.05, r["batch"], surface_cost(
            {int(b): curve for b, curve in data["surface"].items()}))
        assert r["predicted_finite"] == pytest.approx(finite, abs=1e-3)
        assert r["ratio_finite"] == pytest.approx(r["decode_speedup"] / r["predicted_finite"], rel=1e-2)
    assert data["settings"]["synthetic"] == {"alphas": [0.5, 0.9], "gammas": [1, 3], "cost": 0.05, "seed": 0}
    assert data["divergences"] == []
    assert "## Synthetic acceptance (a measuring instrument, not a method)" in printed
    assert "| synthetic α=0.9 γ=3 | 2 | 0.9 | 3 | 0.05 |" in printed and "measured / predicted" in printed
    assert "- synthetic at batch 2: measured / finite prediction within 10% in " in printed
    # drawn, in report.md and the printed report alike: a panel per batch size in a fenced block
    saved = (out / "report.md").read_text(encoding="utf-8")
    figure = saved[saved.index("### Measured against predicted, per α (synthetic)"):]
    figure = figure[:figure.index("\n```\n") + 4]
    assert figure in printed and "```text\n━ Theorem 3.8, cost-aware (predicted)" in figure
    for size in (1, 2):
        assert f"\nbatch {size}: within 10% of the finite prediction in " in figure
    assert "● α=0.5" in figure and "▲ α=0.9" in figure and figure.count("└") == 2
    assert "| predicted (finite) | measured / finite prediction |" in printed
    assert "- pld: " in printed and "- synthetic α" not in printed  # no crossover line for a synthetic cell
    assert load_report(out / "report.json").synthetic[-1].label == "synthetic α=0.9 γ=3"
    old = {key: value for key, value in data.items() if key != "synthetic"}  # a report saved before them
    (out / "report.json").write_text(json.dumps(old))
    assert load_report(out / "report.json").synthetic == []


def test_the_grid_alone_runs_autoregressive_decoding_only_beside_it(tiny_folder, prompts, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--batch", "2",
                     "--synthetic-grid", "0.7:2", "--max-new-tokens", "6", "--threads", "1", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    data = json.loads((out / "report.json").read_text())
    assert [r["method"] for r in data["rows"]] == ["ar"] and data["crossover"] == {}
    assert [(r["label"], r["cost"]) for r in data["synthetic"]] == [("synthetic α=0.7 γ=2", 0.0)]


@pytest.mark.parametrize("flags,line", [
    (["--batch", "1", "--synthetic-grid", "1.2"],
     "synthetic acceptance must be in 0..1, got 1.2; give e.g. --synthetic-grid 0.5,0.7,0.9:1..8"),
    (["--batch", "1", "--synthetic-grid", "0.5,-0.1"],
     "synthetic acceptance must be in 0..1, got -0.1; give e.g. --synthetic-grid 0.5,0.7,0.9:1..8"),
    (["--batch", "1", "--synthetic-grid", "high"],
     "--synthetic-grid takes acceptance values such as 0.5,0.7,0.9, got 'high'; give e.g. --synthetic-grid "
     "0.5,0.7,0.9:1..8"),
    (["--batch", "1", "--synthetic-grid", "0.5:0..3"],
     "--synthetic-grid's draft lengths must be 1..15 (T(B, γ+1) is measured up to k=16), got '0..3'"),
    (["--batch", "1", "--synthetic-grid", "0.5:1..16"],
     "--synthetic-grid's draft lengths must be 1..15 (T(B, γ+1) is measured up to k=16), got '1..16'"),
    (["--batch", "1", "--synthetic-grid", "0.5:a..b"],
     "--synthetic-grid takes its draft lengths as G..G or G,G after the colon, got 'a..b'"),
    (["--batch", "1", "--synthetic-grid", "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9"],
     "--synthetic-grid takes at most 8 acceptance values, got 9; give fewer"),
    (["--batch", "1", "--synthetic-grid", "0.1,0.2,0.3,0.4,0.5:1..15"],
     "--synthetic-grid asks for 5 x 15 = 75 cells, more than 64; give fewer acceptance values or draft lengths"),
    (["--batch", "1", "--synthetic-grid", "0.5", "--synthetic-cost", "5"],
     "--synthetic-cost must be in 0..4 one-token steps, got 5; give e.g. --synthetic-cost 0.05"),
    (["--synthetic-grid", "0.5"],
     "--synthetic-grid measures in the batch bench; give --batch too (e.g. --batch 1,4)"),
    (["--batch", "1", "--synthetic-cost", "0.1"],
     "--synthetic-cost is the cost of --synthetic-grid's draft; give --synthetic-grid A[,A...][:G..G] too"),
    (["--batch", "1", "--methods", "ar,synthetic", "--synthetic-grid", "0.5"],
     "--batch measures the synthetic draft with --synthetic-grid A[,A...][:G..G], not as one of --methods; give "
     "e.g. --methods ar --synthetic-grid 0.5,0.7,0.9:1..8"),
])
def test_bad_synthetic_grid_input_is_one_line(tiny_folder, prompts, tmp_path, capsys, flags, line):
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--out", str(tmp_path / "o"),
                     *flags])
    err = capsys.readouterr().err
    assert code == 2 and line in err and err.strip().count("\n") == 0, err


def test_the_grid_defaults_to_gamma_1_to_8_and_sorts_its_values():
    grid = parse_grid("0.9,0.5,0.7")
    assert grid.alphas == [0.5, 0.7, 0.9] and grid.gammas == list(range(1, 9)) and grid.cost == 0.0
    assert parse_grid("0.5:4,2,2", 0.1).gammas == [2, 4]
    assert parse_grid("0.5:").gammas == list(range(1, 9))  # nothing after the colon: the default
    with pytest.raises(DecodeError):
        parse_grid("0.5:3..1")  # an empty range


def test_the_grid_defaults_to_a_longer_budget_than_the_bench(tiny_folder, prompts, tmp_path, capsys):
    from decoders.core.params import DecodeParams
    from tui_decode.cli.views import GRID_TOKENS, bench_tokens

    assert GRID_TOKENS == 128 > DecodeParams().max_new_tokens == bench_tokens(None, None)
    assert bench_tokens(None, "0.5:1") == GRID_TOKENS and bench_tokens(32, "0.5:1") == 32
    # the tiny model's 128 positions hold the prompt and 64 tokens, not 128: the grid's default is refused
    # in one line before a token is decoded (a run with no grid and no --max-new-tokens would fit)
    code = cli_main(["bench", "--prompts", str(prompts), "--main", str(tiny_folder), "--batch", "1", "--synthetic-grid",
                     "0.5:1", "--threads", "1", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "plus --max-new-tokens (128) exceeds the model's context of 128" in err
    assert "Traceback" not in err
