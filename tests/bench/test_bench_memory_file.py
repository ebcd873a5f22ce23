"""`tui-decode bench --suffix-memory PATH` on a tiny random model: the suffix rows draft from the
memory kept in PATH (read once, checked as `run` checks it), never from a prompt's own baseline
output, and the file is never written (in a session each memory row starts from its own copy); the
memory's path, responses and tokens in report.json's settings and in report.md. No timing assertions."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest

from decoders.bench.report import load_report, render_markdown
from decoders.bench.session import SessionMemories
from decoders.methods.shared.suffix_memory import (
    SuffixMemory,
    identity,
    read_memory,
    read_memory_file,
    reset_memories,
)
from tests.bench.test_bench_session import PROMPTS, watched_bench
from tests.cli.conftest import error_line
from tests.support.tiny import save_tiny_model

ROWS = ["--methods", "ar,pld,suffix", "--variants", "suffix[suffix_mode tree]"]
MEMORY_ROWS = ["suffix", "suffix[suffix_mode tree]"]
ELSEWHERE = [7, 8, 9, 10, 11, 12, 7, 8, 9]  # a response to a prompt the bench does not run (a datastore's)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return str(save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", layers=2))


@pytest.fixture(scope="module")
def family(tiny_folder):
    from decoders.models.family import FamilySpec, load_family

    return load_family(FamilySpec(name="tiny", main=tiny_folder, device="cpu", dtype="float32"))


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return str(path)


@pytest.fixture(scope="module")
def baselines(tiny_folder, prompts_file, tmp_path_factory):
    """Every prompt's (and turn's) baseline output by prompt key, from a session of AR alone."""
    run = watched_bench(["--prompts", prompts_file, "--main", tiny_folder, "--methods", "ar", "--workload", "session",
                         "--record-overhead-every", "0", "--max-new-tokens", "8", "--bandwidth-mb", "1"],
                        tmp_path_factory.mktemp("ar-out"))
    assert len(run["baselines"]) == 4
    return run["baselines"]


@pytest.fixture(scope="module")
def memory_file(family, baselines, tmp_path_factory):
    """A memory for the tiny model holding every bench prompt's own baseline output under its prompt's
    key (as `run --suffix-memory` keeps them), and one response to another prompt."""
    memory = SuffixMemory(24)
    memory.identity, memory.model = identity(family)
    memory.add("elsewhere", ELSEWHERE)
    for key, tokens in baselines.items():
        memory.add(key, tokens)
    path = tmp_path_factory.mktemp("memory") / "memory.bin"
    memory.save(path)
    return path


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _bench(tiny_folder, prompts_file, memory_file, tmp_path, *extra):
    before = (_digest(memory_file), memory_file.stat().st_mtime_ns)
    run = watched_bench(["--prompts", prompts_file, "--main", tiny_folder, *ROWS, "--draft-policy", "fixed",
                         "--record-overhead-every", "1", "--max-new-tokens", "8", "--bandwidth-mb", "1",
                         "--suffix-memory", str(memory_file), *extra], tmp_path)
    assert (_digest(memory_file), memory_file.stat().st_mtime_ns) == before  # never written
    return run


def _never_its_own_baseline(run) -> None:
    """Every time suffix decoding drafted, its memory held the file's other response, and no response
    to this prompt nor a copy of this prompt's baseline output."""
    assert run["drafted_from"]
    for key, entries in run["drafted_from"]:
        baseline = run["baselines"].get(key)
        assert all(prompt != key for prompt, _ in entries)
        assert baseline is None or all(tokens != baseline for _, tokens in entries)
        assert ("elsewhere", ELSEWHERE) in entries


@pytest.mark.parametrize("workload", ["prompts", "session"])
def test_the_suffix_rows_draft_from_the_file_never_from_their_own_baseline_and_leave_it_as_it_was(
        tiny_folder, prompts_file, memory_file, baselines, tmp_path, workload):
    run = _bench(tiny_folder, prompts_file, memory_file, tmp_path, "--workload", workload)
    _never_its_own_baseline(run)
    # the file held the baseline outputs the bench meets again: the memory rows drafted from them on the
    # other prompts (never on their own)
    held = [tokens for _, entries in run["drafted_from"] for _, tokens in entries]
    assert all(any(tokens == baseline for tokens in held) for baseline in baselines.values())
    report = run["report"]
    assert report["settings"]["suffix_memory"] == {"path": str(memory_file), "responses": 5,
                                                   "tokens": len(ELSEWHERE) + sum(map(len, baselines.values()))}
    assert all(e["identical"] for s in report["samples"] for e in s["ours"].values())
    md = (tmp_path / "report.md").read_text()
    line = next(line for line in md.splitlines() if line.startswith("- suffix memory:"))
    assert f"{memory_file}, 5 responses, " in line and "the file left as it was" in line
    assert ("its own copy" in line) == (workload == "session")
    assert "(read only: the bench never writes it)" in run["err"]
    loaded = load_report(tmp_path / "report.json")  # read back, the field typed
    assert loaded.settings.suffix_memory.responses == 5 and line in render_markdown(loaded)
    if workload == "session":  # each memory row started from the file's 5 responses
        assert report["samples"][0]["memory"] == {row: 5 for row in MEMORY_ROWS}


def test_each_session_row_gets_its_own_copy_and_the_seed_stays_as_read(family, memory_file):
    seed = read_memory(family, str(memory_file), 24)
    nodes, entries = seed.nodes, [(e.prompt, list(e.tokens)) for e in seed.entries.values()]
    memories = SessionMemories(family, seed)
    rows: list = [SimpleNamespace(label=label, method="suffix",
                                  params=SimpleNamespace(suffix_source="both", suffix_depth=24))
                  for label in MEMORY_ROWS]
    assert memories.sizes(rows) == {row: 5 for row in MEMORY_ROWS}
    with memories.of(rows[0]) as first:
        first.add("new", [3, 4, 5, 6])
        first.forget("elsewhere")
    with memories.of(rows[1]) as second:
        assert second is not first and len(second) == 5 and second.nodes == nodes
    assert memories.sizes(rows) == {MEMORY_ROWS[0]: 5, MEMORY_ROWS[1]: 5}
    assert [(e.prompt, list(e.tokens)) for e in seed.entries.values()] == entries and seed.nodes == nodes
    assert seed.source == memory_file and not any(m.path for m in (seed, first, second))  # kept nowhere


def test_an_old_report_without_the_memory_still_opens(tiny_folder, prompts_file, tmp_path, capsys):
    from tui_decode.cli.main import main

    reset_memories()
    assert main(["bench", "--prompts", prompts_file, "--main", tiny_folder, "--methods", "ar,suffix", "--limit", "1",
                 "--record-overhead-every", "0", "--max-new-tokens", "2", "--bandwidth-mb", "1",
                 "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    report = json.loads((tmp_path / "report.json").read_text())
    assert "suffix_memory" not in report["settings"]
    assert "- suffix memory:" not in render_markdown(load_report(tmp_path / "report.json"))


@pytest.mark.parametrize("content,message", [
    (None, "does not exist: the bench reads a memory, it never makes one"),
    (b"\x92\xa5junk", "is not a suffix memory file"),  # no "format" in it: never "delete it" (d07)
    (json.dumps({"format": "tui-decode suffix memory", "version": 1, "identity": "x", "model": "another model",
                 "responses": []}).encode(), "was built for another model or tokenizer (another model)"),
])
def test_a_missing_damaged_or_foreign_memory_is_one_line_and_left_intact(capsys, tiny_folder, prompts_file,
                                                                        tmp_path, content, message):
    path = tmp_path / "memory.bin"
    if content is not None:
        path.write_bytes(content)
    err = error_line(capsys, ["bench", "--prompts", prompts_file, "--main", tiny_folder, "--methods", "ar,suffix",
                              "--bandwidth-mb", "1", "--out", str(tmp_path / "out"), "--suffix-memory", str(path)])
    assert message in err
    assert (path.read_bytes() if content is not None else path.exists()) == (content or False)


@pytest.mark.parametrize("argv,message", [
    (["--suffix-memory", " "], "--suffix-memory is empty"),
    (["--suffix-memory", "m.bin", "--sweep", "k=1..2"], "--suffix-memory and --sweep do not go together"),
    (["--suffix-memory", "m.bin", "--backends", "torch,llamacpp"], "--suffix-memory and --backends do not go"),
    (["--suffix-memory-mb", "10"], "--suffix-memory-mb bounds the memory read with --suffix-memory"),
    (["--suffix-memory-mb", "0"], "--suffix-memory-mb must be in 1..16384"),
])
def test_a_bad_memory_flag_is_one_line_before_the_model_loads(capsys, prompts_file, tmp_path, argv, message):
    err = error_line(capsys, ["bench", "--prompts", prompts_file, "--main", str(tmp_path / "no-model"),
                              "--out", str(tmp_path / "out"), *argv])
    assert message in err


def test_the_file_as_read_is_the_memory_the_rows_start_from(memory_file):
    kept = read_memory_file(memory_file)
    assert [p for p, _ in kept.responses][0] == "elsewhere" and len(kept.responses) == 5


def test_an_empty_memory_file_is_read_as_an_empty_memory_and_left_empty(tiny_folder, prompts_file, tmp_path, capsys):
    """`touch mem.bin` (issue 40's sweep, m07): nothing in it to lose, nor damaged; the bench reads
    it as a memory of no responses and, as ever, writes nothing to it."""
    from tui_decode.cli.main import main

    path = tmp_path / "memory.bin"
    path.touch()
    reset_memories()
    code = main(["bench", "--prompts", prompts_file, "--main", tiny_folder, "--methods", "ar,suffix", "--limit", "1",
                 "--record-overhead-every", "0", "--max-new-tokens", "2", "--bandwidth-mb", "1",
                 "--out", str(tmp_path / "out"), "--suffix-memory", str(path)])
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["settings"]["suffix_memory"]["responses"] == 0
    assert path.read_bytes() == b""


def test_the_batch_suffix_rows_read_the_file_without_the_bench_prompts_own_answers(
        tiny_folder, prompts_file, memory_file, baselines, tmp_path, capsys, monkeypatch):
    """`bench --batch 1,2 --methods ar,suffix --suffix-memory PATH`: every suffix row drafts from the
    file's memory with no response to a bench prompt in it (the file holds each prompt's own baseline
    output: an oracle), only the other responses; the file is left as it was, the report says so."""
    from decoders.methods.batch.suffix import SuffixDraft
    from decoders.methods.shared.suffix_memory import prompt_key
    from tui_decode.cli.main import main

    seen: list = []
    real = SuffixDraft.__init__

    def watched(self, seq, k, shape):
        seen.append((list(seq), shape.memory))
        real(self, seq, k, shape)

    monkeypatch.setattr(SuffixDraft, "__init__", watched)
    before = (_digest(memory_file), memory_file.stat().st_mtime_ns)
    out = tmp_path / "out"
    code = main(["bench", "--prompts", prompts_file, "--main", tiny_folder, "--batch", "1,2", "--methods", "ar,suffix",
                 "--max-new-tokens", "8", "--threads", "1", "--suffix-memory", str(memory_file), "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert (_digest(memory_file), memory_file.stat().st_mtime_ns) == before  # never written
    report = json.loads((out / "report.json").read_text())
    note = (f"suffix rows drafted from the memory {memory_file}: 2 responses, read only (3 to the bench's own "
            "prompts left out)")
    assert report["notes"] == [note] and note in printed and note in err
    assert all(r["identical"] for r in report["rows"])
    assert len(seen) >= 6 and len({id(tree) for _, tree in seen}) == 1
    for seq, tree in seen:
        own = baselines[prompt_key(seq[:-1])]  # the row's prompt (its first token follows it)
        assert tree.walk(own) is None  # its own answer is not in the tree it drafts from
        assert tree.walk(ELSEWHERE) is not None
