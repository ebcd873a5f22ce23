"""A method is one file: a method declared and registered in a test runs through the engine and
the command line with no other edit; parameters are declared once, with bounds; acceptance is
decided in one module; the statistics use vLLM's definitions."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from decoders.analysis.stats import DecodeStats
from decoders.core.declarations import Method, ParamSpec, default_method, get_method, register, unregister
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams, all_param_specs, specs_for
from decoders.methods.shared.verify import accept_tree
from decoders.records.run import (
    DraftRow,
    Emitted,
    Iteration,
    RunResult,
)
from tests.support.lookback import SPAN, lookback
from tests.support.tiny import save_tiny_model
from tui_decode.cli.main import main

# -- a method that exists only in this test ---------------------------------------------------------

@pytest.fixture
def registered():
    method = register(Method(name="lookback", label="Lookback", run=lookback, params=(SPAN,), greedy_only=True,
                             detail="echo", draft_length="span", summary="test-only: guess the tail repeats"))
    yield method
    unregister("lookback")


def test_a_registered_method_runs_from_the_command_line(registered, tmp_path, capsys):
    folder = save_tiny_model(tmp_path / "tiny")
    out = tmp_path / "run.json"
    code = main(["run", "--main", str(folder), "--method", "lookback", "--span", "3", "--max-new-tokens", "12",
                 "--raw", "--prompt", "w1 w2 w3 w1 w2 w3 w1 w2", "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    result = RunResult.load(out)
    assert result.method.method == "lookback" and result.params["span"] == 3
    assert result.summary.identical is True and len(result.method.ids) == 12
    assert {it.detail.kind for it in result.method.iters} == {"echo"}
    assert all(len(it.detail.guessed) <= 3 for it in result.method.iters)
    # its parameter has the declared bounds on the command line too
    code = main(["run", "--main", str(folder), "--method", "lookback", "--span", "9", "--prompt", "w1"])
    assert code == 2 and "span must be an integer <= 6, got 9; set --span to 6 or less" in capsys.readouterr().err


def test_a_registered_method_declares_its_parameters_once(registered):
    assert "span" in all_param_specs() and SPAN in specs_for("lookback")
    assert DecodeParams(method="lookback").span == 2
    with pytest.raises(DecodeError, match="Lookback decoding is greedy only"):
        DecodeParams(method="lookback", mode="sampling").validated()


def test_the_default_method_and_the_runs_that_read_the_seed_are_declared(registered):
    assert DecodeParams().method == default_method().name == "spec"  # what runs when none is named
    assert not registered.reads_seed(DecodeParams(method="lookback"))  # declares nothing: greedy needs no seed
    assert get_method("lookahead").reads_seed(DecodeParams(method="lookahead"))  # its window's first guesses
    assert not get_method("spec").reads_seed(DecodeParams())
    assert get_method("jacobi").reads_seed(DecodeParams(method="jacobi", init="random"))
    assert not get_method("jacobi").reads_seed(DecodeParams(method="jacobi"))
    assert get_method("spec").reads_seed(DecodeParams(mode="sampling"))


def test_unknown_methods_and_conflicting_declarations_are_refused():
    with pytest.raises(DecodeError, match="unknown method 'warp'; choose one of ar, "):
        get_method("warp")
    clash = ParamSpec("gamma", "gamma", "another gamma", 3, low=1, high=5)
    with pytest.raises(ValueError, match="declares parameter 'gamma' differently"):
        register(Method(name="clash", label="Clash", run=lookback, params=(clash,)))
    with pytest.raises(DecodeError):
        get_method("clash")


# -- parameters ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,message", [
    (["--ngram-max", "1000000000"], "ngram_max must be an integer <= 16, got 1000000000; set --ngram-max to 16 or less"),
    (["--block", "1000000000"], "block must be an integer <= 64, got 1000000000; set --block to 64 or less"),
    (["--num-pred", "65"], "num_pred must be an integer <= 64, got 65; set --num-pred to 64 or less"),
    (["--gamma", "33"], "gamma must be an integer <= 32, got 33; set --gamma to 32 or less"),
    (["--seed", "-1"], "seed must be an integer >= 0, got -1; set --seed to 0 or more"),
    (["--temperature", "nan"], "temperature must be a number in 0..100, got nan"),
    (["--max-new-tokens", "200000"], "max_new_tokens must be an integer <= 131072"),
])
def test_every_number_has_an_upper_bound_checked_before_any_model_loads(capsys, argv, message):
    code = main(["run", "--method", "pld", "--main", "/nonexistent/never/loaded", "--prompt", "hi", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_errors_for_the_app_name_no_command_line_flags():
    with pytest.raises(DecodeError) as cli:
        DecodeParams(method="pld", ngram_min=4, ngram_max=3).validated()
    with pytest.raises(DecodeError) as ui:
        DecodeParams(method="pld", ngram_min=4, ngram_max=3).validated(ui=True)
    assert "--ngram-min" in str(cli.value) and "--" not in str(ui.value)
    with pytest.raises(DecodeError) as ui:
        DecodeParams(gamma=99).validated(ui=True)
    assert str(ui.value) == "gamma must be an integer <= 32, got 99; set γ draft length to 32 or less"


def test_steps_stay_inside_the_declared_range():
    gamma = get_method("spec").params[0]
    assert [gamma.step_value(v, d) for v, d in ((1, -1), (16, 1), (4, 1), (32, 1))] == [1, 16, 5, 16]
    temperature = next(s for s in specs_for("ar") if s.name == "temperature")
    assert temperature.step_value(0.1, -1) == pytest.approx(0.1) and temperature.step_value(2.0, 1) == 2.0
    assert temperature.step_value(1.0, 1) == pytest.approx(1.1)
    mode = next(s for s in specs_for("ar") if s.name == "mode")
    assert mode.step_value("sampling", 1) == "greedy"


def test_params_are_immutable_and_compare_by_value():
    a = DecodeParams(method="spec", gamma=5)
    assert a == DecodeParams(method="spec", gamma=5) and hash(a) == hash(a.replace())
    assert a.replace(gamma=6).gamma == 6 and a.gamma == 5
    with pytest.raises(AttributeError):
        a.gamma = 7
    with pytest.raises(TypeError, match="unknown decoding parameter"):
        DecodeParams(gama=3)
    assert DecodeParams.from_json(a.to_json()) == a


# -- verification -------------------------------------------------------------------------------------


def test_accept_tree_takes_the_longest_matching_path():
    # root predicts 5; node 0 (5) predicts 7; node 1 (6, a sibling of 0) is wrong;
    # node 2 (7, child of 0) predicts 9; node 3 (8, child of 0) is wrong
    best = [5, 7, 1, 9, 2]
    assert accept_tree(best, [5, 6, 7, 8], [-1, -1, 0, 0]) == ([0, 2], 9)
    assert accept_tree(best, [4, 6], [-1, -1]) == ([], 5)
    # a child of a rejected node is never accepted even if its token matches
    assert accept_tree([5, 3, 9], [4, 3], [-1, 0]) == ([], 5)


# -- statistics ---------------------------------------------------------------------------------------


def iteration(statuses: str, parents=None) -> Iteration:
    code = {"a": "acc", "r": "rej", "u": "unv"}
    rows = [DraftRow(1, "x", None, None, None, code[s], i - 1 if parents is None else parents[i])
            for i, s in enumerate(statuses)]
    n = statuses.count("a")
    return Iteration(k=0, pos=0, draft=rows, emit=[Emitted(1, "x", "acc")] * (n + 1))


def test_statistics_follow_vllm_definitions():
    stats = DecodeStats.of([iteration("aaar"), iteration("ruuu"), iteration("aaaa"), iteration("")])
    assert (stats.drafts, stats.draft_tokens, stats.accepted, stats.judged) == (3, 12, 7, 9)
    assert stats.mean_acceptance_length == round(1 + 7 / 3, 3)
    assert stats.draft_acceptance_rate == round(7 / 12, 3) and stats.acceptance == round(7 / 9, 3)
    assert stats.per_position_acceptance == [round(2 / 3, 3), round(2 / 3, 3), round(2 / 3, 3), round(1 / 3, 3)]
    assert stats.tau == round((4 + 1 + 5 + 1) / 4, 3)


def test_tree_rows_count_by_depth():
    # two branches at depth 0; the first is accepted and so is its child
    stats = DecodeStats.of([iteration("arau", parents=[-1, -1, 0, 1])])
    assert stats.per_position_acceptance == [1.0, 1.0] and stats.drafted_per_pos == [1, 1]
    assert stats.judged == 3 and stats.accepted == 2


def test_saved_tree_rows_keep_their_parents():
    it = iteration("arau", parents=[-1, -1, 0, 1])
    again = Iteration.from_json(json.loads(json.dumps(it.to_json())))
    assert [r.parent for r in again.draft] == [-1, -1, 0, 1]
    chain = Iteration.from_json(iteration("aar").to_json())
    assert [r.parent for r in chain.draft] == [-1, 0, 1] and len(iteration("aar").to_json()["draft"][0]) == 6


def test_listing_methods_and_parameters_loads_no_torch():
    code = ("import sys; from decoders.core.params import all_param_specs; from decoders.core.declarations import all_methods;"
            "all_param_specs(); assert [m.name for m in all_methods()][:4] == ['ar', 'spec', 'pld', 'jacobi'];"
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
