"""One writer a folder on the command line (issue 40): a second `train-head` on the same --out or
--corpus, a second `bench` on the same --out, is one line naming the process that writes it, exit
2, before any model loads; a bench killed between report.json and report.md is told from a whole
pair, and the next bench removes what it left; a killed save's temporary file in the runs folder
is removed by the next save."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.conftest import error_line
from tests.support.tiny import save_tiny_model
from tests.support.writers import dead_pid, held_elsewhere, run_python

DATA = Path(__file__).resolve().parents[1] / "data"
BENCH = ["--methods", "ar,pld", "--max-new-tokens", "4", "--bandwidth-mb", "1", "--record-overhead-every", "0",
         "--threads", "1"]
WRITE_REPORT = """
import sys
from decoders.bench.report import load_report, write_report
write_report(load_report(sys.argv[1]), sys.argv[2])
"""


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def prompts(folder: Path) -> str:
    path = folder / "prompts.jsonl"
    path.write_text(json.dumps({"question_id": 1, "category": "writing", "turns": ["w5 w6 w7 w5 w6"]}) + "\n")
    return str(path)


def test_a_second_train_head_on_the_same_out_is_one_line_before_the_model_loads(capsys, isolated):
    head = isolated / "head"
    with held_elsewhere(head, "the head folder") as pid:
        err = error_line(capsys, ["train-head", "--threads", "1", "--corpus", str(isolated / "c"), "--out", str(head),
                                  "--main", str(isolated / "no-such-model")])
    assert f"error: The head folder {head} is being written by process {pid} (`python " in err
    assert " since 20" in err and err.rstrip().endswith("; wait for it to end, or add --wait to wait for it")


def test_a_second_grow_of_the_same_corpus_is_one_line_before_the_model_loads(capsys, isolated):
    corpus = isolated / "c"
    with held_elsewhere(corpus, "the corpus") as pid:
        err = error_line(capsys, ["train-head", "--threads", "1", "--corpus", str(corpus), "--grow", "1",
                                  "--main", str(isolated / "no-such-model")])
    assert f"error: The corpus {corpus} is being written by process {pid} " in err


@pytest.mark.parametrize("batch", [[], ["--batch", "1,2"]], ids=["batch-1", "batch-bench"])
def test_a_second_bench_on_the_same_out_is_one_line_before_the_model_loads(capsys, isolated, batch):
    out = isolated / "out"
    with held_elsewhere(out, "the report folder") as pid:
        err = error_line(capsys, ["bench", "--prompts", prompts(isolated), "--main", str(isolated / "no-such-model"),
                                  "--out", str(out), *batch])
    assert f"error: The report folder {out} is being written by process {pid} " in err
    assert sorted(os.listdir(out)) == []


@pytest.mark.slow  # a writer killed in a process of its own, then a whole bench
def test_a_bench_killed_between_its_two_files_is_told_and_the_next_one_cleans_up(capsys, isolated, tiny_folder):
    """report.md and report.json were two atomic writes: a kill between them left the Markdown of
    one run beside the JSON of another (and a .tmp-report.*), both looking whole."""
    from decoders.bench.report_pair import report_pair_problem

    out = isolated / "out"
    first = run_python(WRITE_REPORT, str(DATA / "report_bench.json"), str(out))
    assert first.returncode == 0, first.stderr
    assert report_pair_problem(out) is None
    earlier_md = (out / "report.md").read_text()
    other = json.loads((DATA / "report_bench.json").read_text()) | {"created": "2026-12-04 17:00:00"}
    (isolated / "other.json").write_text(json.dumps(other))
    killed = run_python(WRITE_REPORT, str(isolated / "other.json"), str(out), kill_at="write:report.md")
    assert killed.returncode == -9, killed.stderr
    assert (out / "report.md").read_text() == earlier_md and '"created": "2026-12-04 17:00:00"' in \
        (out / "report.json").read_text()
    assert report_pair_problem(out) == "report.md renders another report.json than the one beside it"
    assert [p.name for p in out.iterdir() if p.name.startswith(".tmp-report.md.")]
    assert main_bench(capsys, out, isolated, tiny_folder) == 0
    err = capsys.readouterr().err
    assert f"bench: the report in {out} was left half written by an interrupted bench (report.md renders another " \
           "report.json than the one beside it); this one replaces it" in err, err
    assert sorted(os.listdir(out)) == ["report.json", "report.md"] and report_pair_problem(out) is None


def main_bench(capsys, out: Path, isolated: Path, tiny_folder: Path) -> int:
    from tui_decode.cli.main import main

    code = main(["bench", "--prompts", prompts(isolated), "--main", str(tiny_folder), *BENCH, "--out", str(out)])
    return code


def test_a_killed_saves_temporary_file_in_the_runs_folder_goes_at_the_next_save(isolated):
    from tui_decode.state.runs_folder import write_new

    runs = isolated / "runs"
    runs.mkdir()
    gone, live = dead_pid(), os.getppid()
    (runs / f".tmp-20261204-1700-ar.json.{gone}.k2j4h5g6").write_text("{")
    (runs / f".tmp-20261204-1701-ar.json.{live}.k2j4h5g6").write_text("{")
    write_new(runs, "20261204-1702-ar", ".json", lambda path: path.write_text("{}"))
    assert sorted(os.listdir(runs)) == [f".tmp-20261204-1701-ar.json.{live}.k2j4h5g6", "20261204-1702-ar.json"]
