"""`tui-decode bench --workload session` on a tiny random model: the prompts as one session in the
report's order, every turn of a multi-turn question after the one before it (the first turn's answer
as the assistant's message), each row that drafts from a memory with its own, which holds exactly
that row's answers to the earlier positions and never the prompt's own baseline output; the
speedup by position and per turn in report.json and report.md. No timing assertions."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest

from decoders.bench import load_prompts
from decoders.bench.prompts import BenchPrompt, session_turns
from decoders.bench.report import load_report, render_markdown
from decoders.engine import Engine
from decoders.methods.shared.suffix_memory import SuffixMemory, prompt_key, reset_memories
from tests.cli.conftest import error_line
from tests.support.threads import torch_threads
from tests.support.tiny import save_tiny_model
from tui_decode.cli.main import main

PROMPTS = [  # the session's order: the file's (without --limit), a question's second turn right after its first
    {"question_id": 161, "category": "translation", "turns": ["w10 w11 w12 w10 w11 w12 w13"]},
    {"question_id": 81, "category": "writing", "turns": ["w5 w6 w7 w8 w5 w6 w7", "w9 w5 w6 w7 w30"]},
    {"question_id": 321, "category": "qa", "turns": ["w20 w21 w22 w20 w21 w5 w6"]},
]
ROWS = ["--methods", "ar,pld,suffix", "--variants", "suffix[suffix_mode tree],suffix[suffix_source request]"]
MEMORY_ROWS = ["suffix", "suffix[suffix_mode tree]"]
ORDER = ["q161", "q81", "q81 turn 2", "q321"]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return str(save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", layers=2))


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "session.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return str(path)


def watched_bench(argv: list[str], out_dir) -> dict:
    """``tui-decode bench ARGV --out OUT_DIR`` with every memory row's drafting watched: after suffix
    decoding forgets the prompt's own earlier responses (`SuffixMemory.forget`, outside `add`), what
    its memory holds; and every run's prompt with its baseline's output (`Engine._result`)."""
    drafted_from: list[tuple[str, list[tuple[str, list[int]]]]] = []
    baselines: dict[str, list[int]] = {}
    runs: list[tuple[str, str]] = []  # (prompt key, method) of every run
    real_forget, real_add, real_result = SuffixMemory.forget, SuffixMemory.add, Engine._result
    adding = [False]

    def add(self, prompt, tokens):
        adding[0] = True
        try:
            return real_add(self, prompt, tokens)
        finally:
            adding[0] = False

    def forget(self, prompt):
        gone = real_forget(self, prompt)
        if not adding[0]:
            drafted_from.append((prompt, [(e.prompt, list(e.tokens)) for e in self.entries.values()]))
        return gone

    def result(self, prompt, ids, params, run, baseline, summary):
        baselines[prompt_key(ids)] = list(baseline.ids)
        runs.append((prompt_key(ids), run.method))
        return real_result(self, prompt, ids, params, run, baseline, summary)

    mp = pytest.MonkeyPatch()
    mp.setattr(SuffixMemory, "add", add)
    mp.setattr(SuffixMemory, "forget", forget)
    mp.setattr(Engine, "_result", result)
    reset_memories()
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(stdout), redirect_stderr(stderr), torch_threads(1):
            code = main(["bench", *argv, "--out", str(out_dir)])
    finally:
        mp.undo()
        reset_memories()
    assert code == 0, stderr.getvalue()
    return {"code": code, "out": stdout.getvalue(), "err": stderr.getvalue(), "dir": out_dir,
            "report": json.loads((out_dir / "report.json").read_text()), "drafted_from": drafted_from,
            "baselines": baselines, "runs": runs}


@pytest.fixture(scope="module")
def session_run(tiny_folder, prompts_file, tmp_path_factory):
    """One session, every memory row's drafting watched (`watched_bench`)."""
    return watched_bench(["--prompts", prompts_file, "--main", tiny_folder, *ROWS, "--workload", "session",
                          "--draft-policy", "fixed", "--record-overhead-every", "1", "--max-new-tokens", "8",
                          "--bandwidth-mb", "1"], tmp_path_factory.mktemp("bench-out"))


def test_the_session_runs_every_turn_in_the_reports_order_and_each_memory_row_grows_its_own(session_run):
    assert session_run["code"] == 0, session_run["err"]
    report = session_run["report"]
    assert report["settings"]["workload"] == "session"
    session = report["session"]
    assert session["order"] == ORDER and session["third"] == 1
    samples = report["samples"]
    assert [(s["question_id"], s["position"], s["turn"]) for s in samples] == [
        (161, 0, 1), (81, 1, 1), (81, 2, 2), (321, 3, 1)]
    # each memory row's own memory: empty at the start, one answer more at each position
    assert [s["memory"] for s in samples] == [{row: n for row in MEMORY_ROWS} for n in range(4)]
    assert list(session["rows"]) == MEMORY_ROWS  # neither pld nor the suffix row that drafts from this request only
    for label in MEMORY_ROWS:
        at = session["rows"][label]
        assert at["memory"] == [0, 1, 2, 3] and len(at["speedups"]) == 4
        assert at["first"]["ours"]["n"] == 1 and at["last"]["ours"]["n"] == 1
        assert at["speedups"][0] == pytest.approx(samples[0]["ours"][label]["speedup"], abs=1e-4)
        assert at["last"]["ours"]["speedup"] == pytest.approx(samples[3]["ours"][label]["speedup"], abs=2e-3)
    assert all(e["identical"] for s in samples for e in s["ours"].values())


def test_the_second_turn_follows_the_first_turns_answer_in_the_chat_template(session_run, tiny_folder):
    from decoders.models.family import FamilySpec, load_family

    family = load_family(FamilySpec(name="tiny", main=tiny_folder, device="cpu", dtype="float32"))
    first, second = session_run["report"]["samples"][1:3]
    answer = family.answer_text(first["ours"]["ar"]["ids"])
    ids = family.encode_prompt(PROMPTS[1]["turns"][1], True, (PROMPTS[1]["turns"][0], answer))
    assert second["prompt_tokens"] == len(ids) > first["prompt_tokens"]
    ran = [method for key, method in session_run["runs"] if key == prompt_key(ids)]
    assert sorted(ran) == ["ar"] + ["pld"] * 2 + ["suffix"] * 6  # every row (with recording on too), AR again
    rendered = family.tokenizer.decode(ids)
    assert rendered.index(PROMPTS[1]["turns"][0]) < rendered.index(answer) < rendered.index(PROMPTS[1]["turns"][1])
    turns = session_run["report"]["session"]["turns"]
    assert list(turns) == ["1", "2"] and turns["1"]["suffix"]["ours"]["n"] == 3 and turns["2"]["suffix"]["ours"]["n"] == 1


def test_a_prompts_own_baseline_output_is_never_in_the_memory_it_drafts_from(session_run):
    """Every time suffix decoding drafted (its timed runs, the record=True twins, the warm-ups), its memory
    held no response to this prompt and no copy of this prompt's baseline output; and in the session each
    memory held exactly the answers to the positions before (a twin's memory as its first run's)."""
    samples = session_run["report"]["samples"]
    answers = [s["ours"]["suffix"]["ids"] for s in samples]
    assert session_run["drafted_from"]
    for key, entries in session_run["drafted_from"]:
        baseline = session_run["baselines"].get(key)
        assert all(prompt != key for prompt, _ in entries)
        assert baseline is None or all(tokens != baseline for _, tokens in entries)
    held = [[tokens for _, tokens in entries] for _, entries in session_run["drafted_from"]]
    assert all(any(memory == answers[:n] for n in range(4)) for memory in held)  # never anything else
    assert all(answers[:n] in held for n in range(4))  # at position n: the answers to positions 0..n-1


def test_the_tables_say_which_rows_and_why(session_run, tmp_path):
    md = (session_run["dir"] / "report.md").read_text()
    assert "- workload: one session of 3 prompts, 4 turns in this order: q161, q81, q81 turn 2, q321" in md
    section = md.split("## By position in the session")[1].split("\n## ")[0]
    assert "Only those rows are shown: nothing any other row drafts from changes between positions" in section
    table = [line for line in section.splitlines() if line.startswith("| Suffix")]
    assert [line.split(" | ")[0] for line in table] == ["| Suffix decoding", "| Suffix decoding [suffix_mode tree]"]
    assert all(line.split(" | ")[4] == "0..3" for line in table)
    assert "## Per turn" in md and "| Prompt lookup |" in md.split("## Per turn")[1]
    assert "By position in the session" in session_run["out"] and "Per turn" in session_run["out"]
    assert "| q81 turn 2 |" in md  # the per-prompt table names the turn
    report = load_report(session_run["dir"] / "report.json")  # read back, every field typed
    assert report.session.order == ORDER and render_markdown(report).split("\n")[3] == md.split("\n")[3]


def test_a_run_of_separate_prompts_keeps_its_report_as_before(tiny_folder, prompts_file, tmp_path, capsys):
    reset_memories()
    with torch_threads(1):
        code = main(["bench", "--prompts", prompts_file, "--main", tiny_folder, "--methods", "ar,suffix",
                     "--record-overhead-every", "0", "--max-new-tokens", "4", "--bandwidth-mb", "1",
                     "--out", str(tmp_path)])
    capsys.readouterr()
    report = json.loads((tmp_path / "report.json").read_text())
    assert code == 0 and "session" not in report and "workload" not in report["settings"]
    assert [s["question_id"] for s in report["samples"]] == [161, 81, 321]  # first turns only
    assert not any(key in s for s in report["samples"] for key in ("position", "turn", "memory"))
    assert "By position" not in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize("argv,message", [
    (["--workload", "sessions"], "argument --workload: invalid choice: 'sessions' (choose from"),
    (["--workload", "session", "--sweep", "k=1..2"], "--workload session and --sweep do not go together"),
    (["--workload", "session", "--batch", "1,2"], "--workload session and --batch do not go together"),
    (["--workload", "session", "--backends", "torch,llamacpp"], "--workload session and --backends do not go"),
])
def test_a_bad_workload_is_one_line_before_the_model_loads(capsys, prompts_file, tmp_path, argv, message):
    err = error_line(capsys, ["bench", "--prompts", prompts_file, "--main", str(tmp_path / "no-model"),
                              "--out", str(tmp_path / "out"), *argv])
    assert message in err


def test_a_later_turn_that_is_not_a_message_is_one_line_in_a_session_only(capsys, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question_id": 7, "category": "writing", "turns": ["w5 w6", 42]}) + "\n")
    assert load_prompts(path)[0].text == "w5 w6"  # the first turn is all a run of separate prompts reads
    err = error_line(capsys, ["bench", "--prompts", str(path), "--main", str(tmp_path / "no-model"),
                              "--out", str(tmp_path / "out"), "--workload", "session"])
    assert f"{path} line 1: turn 2 must be a non-empty string (the user's message)" in err


def test_a_prompts_next_turn_carries_the_conversation_before_it():
    first = BenchPrompt(81, "writing", "one", ("two", "three"))
    second = first.next_turn("answer one")
    assert second is not None and (second.text, second.history, second.turn, second.name) == (
        "two", ("one", "answer one"), 2, "q81 turn 2")
    third = second.next_turn("answer two")
    assert third is not None and third.history == ("one", "answer one", "two", "answer two") and third.turn == 3
    assert third.next_turn("answer three") is None and session_turns(third) == ["one", "two", "three"]


def test_a_conversation_without_the_chat_template_is_its_messages_a_blank_line_apart(tiny_folder):
    from decoders.models.family import FamilySpec, load_family

    family = load_family(FamilySpec(name="tiny", main=tiny_folder, device="cpu", dtype="float32"))
    raw = family.encode_prompt("w17 w18", False, ("w10 w11", "w12 w13"))
    assert raw == list(family.tokenizer("w10 w11\n\nw12 w13\n\nw17 w18")["input_ids"])
    assert family.encode_prompt("w17 w18", False) == list(family.tokenizer("w17 w18")["input_ids"])
    given = []
    real = family.tokenizer.apply_chat_template

    def template(messages, **kwargs):  # the tiny tokenizer reads every role word as <unk>: the messages, as given
        given.append(messages)
        return real(messages, **kwargs)

    family.tokenizer.apply_chat_template = template
    try:
        chat = family.encode_prompt("w17 w18", True, ("w10 w11", "w12 w13"))
    finally:
        del family.tokenizer.apply_chat_template
    messages = [{"role": "user", "content": "w10 w11"}, {"role": "assistant", "content": "w12 w13"},
                {"role": "user", "content": "w17 w18"}]
    assert given == [messages]
    rendered = family.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert chat == list(family.tokenizer(rendered, add_special_tokens=False)["input_ids"])


def test_each_repeat_is_the_session_again_from_empty_memories(tiny_folder, prompts_file):
    from decoders.bench import run_bench
    from decoders.models.family import FamilySpec, load_family

    reset_memories()
    family = load_family(FamilySpec(name="tiny", main=tiny_folder, device="cpu", dtype="float32"))
    with torch_threads(1):
        report = run_bench(family, load_prompts(prompts_file), ["suffix"], max_new_tokens=4, repeats=2,
                           record_overhead_every=0, bandwidth_bytes=1 << 20, warm_up=False, workload="session")
    reset_memories()
    assert [(s.repeat, s.position, s.memory) for s in report.samples] == [
        (r, p, {"suffix": p}) for r in range(2) for p in range(4)]
    at = report.session.rows["suffix"]
    assert at.memory == [0, 1, 2, 3] and at.first.ours.n == 2 and at.last.ours.n == 2
    assert report.session.order == ORDER
