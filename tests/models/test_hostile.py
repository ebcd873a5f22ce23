"""Hostile input and faults (issue 14): every case ends as one line on stderr (no traceback), the
exit code the class calls for (2 bad input, 1 internal failure with a crash report, 130/143
signals), and every file that was there before is byte-identical after.

Models, where needed, are the tiny random ones of tests/tiny.py; a GGUF conversion is simulated
by handing transformers' loaders a tiny model, so the real writing, checksum and cleanup code runs.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.gguf import empty_gguf
from tests.support.tiny import save_tiny_model, tiny_model, tiny_tokenizer
from tui_decode.cli.main import main

REPO = Path(__file__).resolve().parents[2]
RUN_DATA = REPO / "tests" / "data" / "run_spec.json"


# -- helpers --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Cache, config and crash reports under tmp_path; a watched folder with a precious file."""
    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "config").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.json").write_bytes(RUN_DATA.read_bytes())  # an earlier, valid run
    (work / "notes.txt").write_text("keep me\n")
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the crash reports folder aside) and its bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "crash-" not in path.name:
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


def hostile(capsys, root: Path, argv: list[str], code: int, message: str) -> str:
    """Run the CLI on ``argv``: exit ``code``, one line on stderr containing ``message``, no
    traceback, and the files under ``root`` unchanged. Returns stdout.

    The bench's progress lines ("bench: ...", "note: ...") may come before the one line."""
    before = snapshot(root)
    got = main(argv)
    out, err = capsys.readouterr()
    assert got == code, err
    assert message in err, err
    progress = [line for line in err.splitlines()[:-1] if line.startswith(("bench: ", "note: "))]
    err = err[sum(len(line) + 1 for line in progress):] if argv[0] == "bench" else err
    assert err.count("\n") == 1 and err.startswith("tui-decode: "), err
    assert "Traceback" not in err + out
    assert snapshot(root) == before
    return out


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


# -- 1. unbounded and edge numbers: refused up front, the bound in the message -------------------
PROMPT = ["--prompt", "w5 w6 w7 w5 w6"]


@pytest.mark.parametrize("argv,message", [
    (["--method", "pld", "--ngram-max", "1000000000"], "ngram_max must be an integer <="),
    (["--method", "jacobi", "--block", "1000000000"], "block must be an integer <="),
    (["--method", "pld", "--num-pred", "1000000000"], "num_pred must be an integer <="),
    (["--max-new-tokens", "1000000000"], "max_new_tokens must be an integer <= 131072"),
    (["--seed", str(2**64 + 1)], "seed must be an integer <= 2147483647"),
    (["--seed", "-1"], "seed must be an integer >= 0"),
    (["--mode", "sampling", "--method", "pld", "--temperature", "1e-45"],
     "temperature must be at least 0.01 in sampling mode, got 1e-45"),
    (["--mode", "sampling", "--method", "pld", "--temperature", "0"],
     "temperature must be > 0 in sampling mode (at least 0.01)"),
    (["--mode", "sampling", "--method", "pld", "--temperature", "inf"], "temperature must be a number <= 100"),
    (["--mode", "sampling", "--method", "pld", "--temperature", "nan"], "temperature must be a number in 0..100"),
    (["--max-new-tokens", "8.5"], "invalid int value"),
    (["--temperature", "-inf"], "temperature must be a number >= 0, got -inf"),  # issue 26: "expected one argument"
])
def test_numbers_out_of_bounds(capsys, isolated, tiny_folder, argv, message):
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), *PROMPT, *argv], 2, message)


# -- the int4 self-draft (issue 9): conflicts, unknown kinds, shapes and memory ----------------------
@pytest.mark.parametrize("argv,message", [
    (["--self-draft", "int4", "--helper", "x/y"], "give either --self-draft int4 or --helper SRC, not both"),
    (["--self-draft", "int4", "--self-draft-layer", "1"], "give either --self-draft int4 or --self-draft-layer L, not both"),
    (["--self-draft", "int3"], "unknown --self-draft kind 'int3'; choose one of int4"),
    (["--self-draft", ""], "--self-draft is empty"),
])
def test_self_draft_conflicts_and_unknown_kinds(capsys, isolated, tiny_folder, argv, message):
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), "--method", "spec", *PROMPT, *argv], 2, message)


def test_self_draft_of_a_shape_the_int4_kernel_cannot_take(capsys, isolated, tmp_path):
    from transformers import LlamaForCausalLM

    from tests.support.tiny import tiny_llama_config

    config = tiny_llama_config()
    config.intermediate_size = 40  # down_proj reads 40 inputs: not whole groups of 32
    folder = save_tiny_model(tmp_path / "odd", model=LlamaForCausalLM(config).eval())
    capsys.readouterr()  # the writer's progress bar
    hostile(capsys, isolated, ["run", "--main", str(folder), "--self-draft", "int4", "--method", "spec", *PROMPT], 2,
            "Cannot build an int4 self-draft of this model: down_proj reads 40 inputs, not a multiple of the int4 "
            "group size 32")


def test_self_draft_with_too_little_memory(monkeypatch, capsys, isolated, tiny_folder):
    import decoders.models.memory

    monkeypatch.setattr(decoders.models.memory, "available_memory", lambda device=None: 50_000)
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), "--self-draft", "int4", "--method", "spec", *PROMPT],
            2, "Not enough memory for an int4 self-draft of this model (its packed weights, scales and room to pack them): it needs "
               "about 93 KB and only 50 KB is free in main memory; close other programs, or draft with an "
               "early-exit layer or a helper model instead.")


def test_the_int4_draft_estimate_is_what_the_built_draft_holds():
    """The memory check's estimate (`draft_bytes`) against the bytes the built draft holds."""
    from decoders.backends.quantized import draft_bytes
    from decoders.models.backend_choice import make_backend, quantized_draft
    from decoders.models.memory import available_memory

    model = tiny_model()
    kept, working = draft_bytes(model)
    draft = quantized_draft(make_backend(model), model, "int4")
    cache = kept - draft.own_bytes  # one chunk of its KV cache: 2 layers x K and V x 2 heads x 128 x 8 x 4 bytes
    assert draft.own_bytes == 2 * (64 * 32 // 2 + 32 * 32 // 2 + 128 * 32 // 2 + 32 * 64 // 2) + 2 * (
        64 + 32 + 128 + 2 * 32) * 2 * 2 == 11520
    assert cache == 2 * 2 * 2 * 128 * 8 * 4 and working == 128 * 32 * 12
    assert available_memory() is None or available_memory() > 0


def test_tiny_temperature_is_rejected_before_any_model_time(monkeypatch, capsys, isolated, tiny_folder):
    import decoders.models.family

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded for a run that must be refused up front")

    monkeypatch.setattr(decoders.models.family, "load_family", no_loading)
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), *PROMPT, "--mode", "sampling",
                               "--temperature", "0.001"], 2, "at least 0.01")


# -- 2. destinations: checked before the run; a failed write keeps the result and the old file ----
@pytest.mark.parametrize("where,message", [
    ("missing/run.json", "the folder"),
    (".", "it is a folder"),
    ("notes.txt/run.json", "is not a folder"),
])
def test_json_destination_checked_up_front(monkeypatch, capsys, isolated, tiny_folder, where, message):
    import decoders.models.family

    monkeypatch.setattr(decoders.models.family, "load_family", lambda *a, **k: pytest.fail("model loaded"))
    dest = isolated / "work" / where
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), *PROMPT, "--json", str(dest)], 2, message)


def test_json_destination_unwritable_folder(monkeypatch, capsys, isolated, tiny_folder):
    """Root ignores permission bits, so an unwritable folder is simulated where it shows: creating a file."""
    import tempfile

    import decoders.models.family

    monkeypatch.setattr(decoders.models.family, "load_family", lambda *a, **k: pytest.fail("model loaded"))
    real = tempfile.mkstemp

    def denied(*args, dir=None, **kwargs):
        if dir is not None and Path(dir) == isolated / "work":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), *PROMPT, "--json",
                               str(isolated / "work" / "run.json")], 2, "permission denied")


def full_disk_after(monkeypatch, nbytes: int = 100):
    """Make atomic writes fail with ENOSPC after ``nbytes`` reached the temporary file."""
    from decoders.records import atomic

    def write_some(handle, data):
        handle.write(bytes(data[:nbytes]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic, "_write_all", write_some)


def test_full_disk_on_run_json_keeps_old_file_and_shows_result(monkeypatch, capsys, isolated, tiny_folder):
    """Fault injection, writer 1: `run --json PATH` on a full disk, mid-write."""
    full_disk_after(monkeypatch)
    dest = isolated / "work" / "run.json"
    out = hostile(capsys, isolated, ["run", "--main", str(tiny_folder), "--method", "pld", *PROMPT,
                                     "--max-new-tokens", "4", "--json", str(dest)], 2,
                  f"nothing was written to the run {dest}: no space left on device")
    assert "tokens emitted" in out  # the summary of the run that finished is still shown
    assert sorted(p.name for p in dest.parent.iterdir()) == ["notes.txt", "run.json"]  # no temp file left


def test_json_to_dev_full_keeps_the_device_and_shows_result(capsys, isolated, tiny_folder):
    """A real full device: written in place (renaming over /dev/full would replace the device)."""
    import stat

    out = hostile(capsys, isolated, ["run", "--main", str(tiny_folder), "--method", "pld", *PROMPT,
                                     "--max-new-tokens", "4", "--json", "/dev/full"], 2,
                  "nothing was written to the run /dev/full: no space left on device")
    assert "tokens emitted" in out
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_save_through_a_symlink_keeps_the_link(isolated):
    from decoders.records.run import RunResult

    target = isolated / "work" / "run.json"
    link = isolated / "work" / "latest.json"
    link.symlink_to(target)
    RunResult.load(RUN_DATA).save(link)
    assert link.is_symlink() and json.loads(target.read_text())["summary"]["tokens"] == 20


def test_full_disk_on_save_raises_one_line_and_keeps_old_file(monkeypatch, isolated):
    """Fault injection, writer 1 through the API the app uses (ctrl+s): still an OSError, too."""
    from decoders.core.errors import DecodeError
    from decoders.records.atomic import WriteError
    from decoders.records.run import RunResult

    result = RunResult.load(RUN_DATA)
    dest = isolated / "work" / "run.json"
    before = dest.read_bytes()
    full_disk_after(monkeypatch)
    with pytest.raises(WriteError) as info:
        result.save(dest)
    assert isinstance(info.value, DecodeError) and isinstance(info.value, OSError)
    assert info.value.errno == errno.ENOSPC and "no space left on device" in str(info.value)
    assert dest.read_bytes() == before
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".tmp-")]


def test_atomic_write_replaces_whole_file_and_keeps_mode(isolated):
    from decoders.records import atomic

    dest = isolated / "work" / "notes.txt"
    dest.chmod(0o640)
    atomic.write_text(dest, "new ü\n")
    assert dest.read_text(encoding="utf-8") == "new ü\n"
    assert dest.stat().st_mode & 0o777 == 0o640


# -- 3. text that is not UTF-8, and files of unbounded size -------------------------------------
def prompt_file(isolated: Path, name: str, data: bytes) -> str:
    path = isolated / "work" / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("name,data,message", [
    ("utf16.txt", "w5 w6".encode("utf-16"), "is not UTF-8 text (it looks like UTF-16)"),
    ("latin1.txt", "café w5".encode("latin-1"), "byte 0xe9 at offset 3"),
    ("big.txt", b"w5 " * (2 << 20), "is larger than 4 MiB, the most that is read"),
])
def test_prompt_file_bad_text(capsys, isolated, tiny_folder, name, data, message):
    path = prompt_file(isolated, name, data)
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), "--prompt-file", path], 2, message)


@pytest.mark.parametrize("path,message", [
    ("/dev/zero", "cannot read the prompt file /dev/zero: it is a character device, not a file; give a readable"),
    ("{tmp}", "it is a folder"),
    ("{tmp}/missing.txt", "it does not exist"),
])
def test_prompt_file_unusable(capsys, isolated, tiny_folder, path, message):
    path = path.format(tmp=isolated / "work")
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), "--prompt-file", path], 2, message)


def _within(seconds: float, call):
    """``call()``'s value, failing (not hanging) when it takes longer than ``seconds``."""
    import threading

    box: list = []
    worker = threading.Thread(target=lambda: box.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"still waiting after {seconds} s"
    return box[0]


@pytest.mark.parametrize("flag", ["--prompt-file", "--open", "bench --prompts"])
def test_a_fifo_nothing_writes_to_is_one_line_not_a_wait_forever(capsys, isolated, tiny_folder, flag):
    """Issue 26: FIFOs given to --prompt-file, bench --prompts and --open waited without a word."""
    fifo = isolated / "work" / "pipe"
    os.mkfifo(fifo)
    argv = {"--prompt-file": ["run", "--main", str(tiny_folder), "--prompt-file", str(fifo)],
            "--open": ["--open", str(fifo)],
            "bench --prompts": ["bench", "--main", str(tiny_folder), "--prompts", str(fifo)]}[flag]
    assert _within(20, lambda: main(argv)) == 2
    err = one_line(capsys)
    assert "FIFO (named pipe) that nothing writes to; start the writer first" in err and str(fifo) in err


def test_a_fifo_being_written_to_is_read(isolated):
    """A pipe with a writer (``/dev/stdin`` of ``echo hi | tui-decode run --prompt-file /dev/stdin``)
    is read as before."""
    import threading

    from decoders.records.inputs import read_text

    fifo = isolated / "work" / "pipe"
    os.mkfifo(fifo)

    def write():
        with fifo.open("wb") as handle:
            handle.write(b"w5 w6 w7")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    time.sleep(0.05)  # the writer is waiting in its open() for a reader
    assert _within(20, lambda: read_text(fifo, "the prompt file", 1000, "fix")) == "w5 w6 w7"


def test_json_to_a_fifo_nothing_reads_shows_the_run_and_says_so(capsys, isolated, tiny_folder):
    """Issue 26: the run decoded, then waited forever opening the FIFO; ctrl+c discarded it."""
    fifo = isolated / "work" / "out.json"
    os.mkfifo(fifo)
    argv = ["run", "--main", str(tiny_folder), "--method", "pld", *PROMPT, "--max-new-tokens", "4",
            "--json", str(fifo)]
    assert _within(60, lambda: main(argv)) == 2
    out, err = capsys.readouterr()
    assert "tokens emitted" in out  # the run is shown
    assert err.count("\n") == 1 and "FIFO (named pipe) that nothing reads; start the reader first" in err


@pytest.mark.parametrize("flag", ["--family", "--main", "--helper", "--json", "--prompt-file", "--device-map"])
def test_an_empty_value_is_refused_not_ignored(capsys, isolated, tiny_folder, flag):
    """Issue 26: `--family ''`, `--main ''` and `--json ''` were ignored, with exit 0."""
    argv = ["run", "--main", str(tiny_folder), *PROMPT, "--max-new-tokens", "2"]
    if flag == "--main":
        argv = ["run", *PROMPT, "--max-new-tokens", "2"]
    if flag == "--prompt-file":
        argv = ["run", "--main", str(tiny_folder), "--max-new-tokens", "2"]
    hostile(capsys, isolated, [*argv, flag, ""], 2, f"{flag} is empty")


def test_open_of_an_empty_path_is_refused(capsys, isolated):
    hostile(capsys, isolated, ["--open", ""], 2, "--open is empty")


@pytest.mark.parametrize("argv,message", [
    (["run", "--main", "{tiny}", *PROMPT, "--json", "{work}/" + "j" * 300], "(given to --json): file name too long"),
    (["run", "--main", "/" + "m" * 5000, *PROMPT], "cannot be looked up: File name too long"),
    (["bench", "--main", "{tiny}", "--prompts", "{prompts}", "--out", "{work}/" + "o" * 5000],
     "(given to --out): file name too long"),
])
def test_names_too_long_for_the_file_system_are_one_short_line(capsys, isolated, tiny_folder, argv, message):
    """Issue 26: is_dir() / exists() raised ENAMETOOLONG, exit 1; and the line must not echo 5,000
    characters back."""
    prompts = isolated / "work" / "p.jsonl"
    prompts.write_text('{"question_id": 1, "category": "qa", "turns": ["w5 w6"]}\n')
    argv = [a.format(tiny=tiny_folder, work=isolated / "work", prompts=prompts) for a in argv]
    before = snapshot(isolated)
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert message in err and len(err) < 1000 and "Traceback" not in err, err
    assert snapshot(isolated) == before


def test_a_huge_file_is_not_read_past_the_bound_and_dev_zero_not_at_all(monkeypatch, capsys, isolated):
    """A 1 GiB file (sparse) is read to the bound and no further; /dev/zero, a device, is not read
    at all (issue 40's sweep: as a suffix memory it was read to 4 GB, 31 s, before its refusal)."""
    from decoders.records import inputs

    reads = []
    real_fdopen = os.fdopen

    def counting_fdopen(fd, *args, **kwargs):
        handle = real_fdopen(fd, *args, **kwargs)
        real_read = handle.read
        handle_read = lambda n=-1: reads.append(n) or real_read(n)  # noqa: E731
        return type("H", (), {"read": staticmethod(handle_read), "__enter__": lambda s: s,
                              "__exit__": lambda s, *a: handle.close()})()

    monkeypatch.setattr(os, "fdopen", counting_fdopen)
    huge = isolated / "huge.txt"
    with open(huge, "wb") as handle:
        handle.truncate(1 << 30)
    with pytest.raises(Exception, match="larger than 4 MiB"):
        inputs.read_text(huge, "the prompt file", inputs.MAX_PROMPT_BYTES, "fix")
    assert reads == [inputs.MAX_PROMPT_BYTES + 1]
    with pytest.raises(Exception, match="the prompt file /dev/zero: it is a character device, not a file; fix"):
        inputs.read_text("/dev/zero", "the prompt file", inputs.MAX_PROMPT_BYTES, "fix")
    assert reads == [inputs.MAX_PROMPT_BYTES + 1]  # nothing more read


def test_prompt_with_surrogates(capsys, isolated, tiny_folder):
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), "--prompt", "w5 \udcff w6"], 2,
            "the --prompt text is not valid UTF-8 text")


@pytest.mark.parametrize("data,message", [
    ('[families.x]\nmain = "bundled"\n'.encode("utf-16"), "is not UTF-8 text (it looks like UTF-16)"),
    (b'[families.x]\nmain = "caf\xe9"\n', "byte 0xe9"),
    (b"#" * (2 << 20), "is larger than 1 MiB"),
    (b"[families.x\nmain = 1", "not valid TOML"),
    (b"a = " + b"[" * 100000, "not valid TOML"),
])
def test_families_toml_bad(capsys, isolated, data, message):
    (isolated / "config" / "families.toml").write_bytes(data)
    hostile(capsys, isolated, ["families"], 2, message)


@pytest.mark.parametrize("make,message", [
    (lambda p: p.mkdir(), "is not a file; make it a TOML file"),
    (lambda p: p.symlink_to(p), "is a symlink that leads to no file (a loop"),
    (lambda p: p.symlink_to(p.parent / "gone.toml"), "is a symlink that leads to no file"),
    (lambda p: p.write_text('[families.x]\nmain = ""\n'), "[families.x] has no `main`"),
    (lambda p: p.write_text('[families.x]\nmain = "bundled"\nhelper = " "\n'), "`helper` is empty"),
])
def test_a_families_toml_that_is_no_file_is_said_not_ignored(capsys, isolated, make, message):
    """Issue 26: a families.toml that is a folder or a symlink loop was silently ignored while
    `families` named it as the config; `main = ""` read the current folder."""
    make(isolated / "config" / "families.toml")
    hostile(capsys, isolated, ["families"], 2, message)


# -- 4. saved runs with bad content (read before the app starts: the same check the app uses) ----
def bad_run(isolated: Path, edit) -> str:
    data = json.loads(RUN_DATA.read_text())
    edit(data)
    path = isolated / "work" / "bad.json"
    path.write_text(json.dumps(data))
    return str(path)


def _set(path: list, value):
    def edit(d):
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit,message", [
    (_set(["summary", "tau"], "fast"), "tau"),
    (_set(["runs", "method", "ids"], "abc"), "runs.method.ids must be a list"),
    (_set(["runs", "method", "tokens"], [1, 2]), "runs.method.tokens[0] must be"),
    (_set(["runs", "method", "kinds"], ["acc"]), "runs.method.kinds has 1 entries for 20 tokens"),
    (_set(["runs", "method", "iters", 0, "k"], "0"), "runs.method.iters[0].k must be an integer"),
    (_set(["runs", "method", "iters", 1, "draft", 0, 5], "maybe"), "runs.method.iters[1].draft[0]"),
    (_set(["runs", "method", "iters", 1, "emit"], [[1, "x"]]), "runs.method.iters[1].emit[0]"),
    (_set(["runs", "method", "iters", 1, "detail"], {"kind": "warp"}), "unknown kind 'warp'"),
    (_set(["runs", "baseline", "time_ms"], {"wall": "1s"}), "runs.baseline.time_ms.wall must be"),
    (_set(["runs"], []), "runs must be an object"),
])
def test_open_run_with_bad_fields(capsys, isolated, edit, message):
    path = bad_run(isolated, edit)
    hostile(capsys, isolated, ["--open", path], 2, message)


@pytest.mark.parametrize("edit,message", [
    (_set(["params", "method"], "nosuch"), "params.method is 'nosuch', not a method this version has"),
    (_set(["params", "gamma"], 10 ** 6), "params: gamma must be an integer <="),
    (_set(["summary", "speedup_decode"], 0), "summary.speedup_decode must be a number >= 1e-06"),
    (_set(["summary", "speedup_wall"], -2.5), "summary.speedup_wall must be a number >= 1e-06"),
])
def test_open_run_the_app_cannot_show_is_exit_2(capsys, isolated, edit, message):
    """Issue 26: `--open` of a run whose method is unknown exited 1 (a crash in the app); a
    speedup of 0 wedged the app (ZeroDivisionError while the first screen mounted)."""
    path = bad_run(isolated, edit)
    hostile(capsys, isolated, ["--open", path], 2, message)


def _drop(path: list):
    def edit(d):
        for key in path[:-1]:
            d = d[key]
        del d[path[-1]]
    return edit


@pytest.mark.parametrize("edit,message", [
    (_set(["runs", "method", "iters", 3, "draft", 0, 2], "high"), "runs.method.iters[3].draft[0][2] must be a number"),
    (_set(["runs", "method", "iters", 2, "top", "p", 0, 1], [5, "x", "hi"]),
     "runs.method.iters[2].detail.p[0][1][2] must be a number, got str"),
    (_set(["runs", "method", "iters", 2, "detail"], {"kind": "jacobi", "before": []}),
     "runs.method.iters[2].detail has no after"),
    (_set(["runs", "method", "iters", 0, "detail"], {"kind": "telepathy", "guess": 1}),
     "runs.method.iters[0].detail has an unknown kind 'telepathy'"),
    (_drop(["runs", "method", "iters", 4, "pos"]), "runs.method.iters[4] has no pos"),
    (_drop(["runs", "baseline", "finish"]), "runs.baseline has no finish"),
    (_set(["summary", "tokens"], None), "summary.tokens must be an integer, got null"),
    (_set(["runs", "method", "n_forward", "main"], "17"), "runs.method.n_forward.main must be an integer, got str"),
])
def test_a_malformed_run_gets_one_line_naming_the_field(tmp_path, edit, message):
    """Loading checks every field against the declared records (issue 22): one line, the file and the field."""
    import tui_decode.app  # noqa: F401 (the app's imports register every method's detail kinds)
    from decoders.core.errors import DecodeError
    from decoders.records.run import RunResult

    data = json.loads(RUN_DATA.read_text())
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DecodeError) as info:
        RunResult.load(path)
    text = str(info.value)
    assert message in text and str(path) in text and "\n" not in text, text


@pytest.mark.parametrize("data,message", [
    (b"", "is empty, not a saved run"),
    (RUN_DATA.read_bytes()[:500], "is not a tui-decode run record"),
    (RUN_DATA.read_text().encode("utf-16"), "is not UTF-8 text"),
    (b"[1, 2, 3]", "the run must be an object"),
    (b"[" * 100000 + b"]" * 100000, "is not a tui-decode run record"),
])
def test_open_damaged_run_file(capsys, isolated, data, message):
    path = isolated / "work" / "damaged.json"
    path.write_bytes(data)
    hostile(capsys, isolated, ["--open", str(path)], 2, message)


def test_open_a_folder(capsys, isolated):
    hostile(capsys, isolated, ["--open", str(isolated / "work")], 2,
            f"cannot read the saved run {isolated / 'work'}: it is a folder; give the path of a RUN.json")


# -- 5. files and folders the process may not use -----------------------------------------------
def test_unreadable_model_folder(monkeypatch, capsys, isolated, tiny_folder):
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == tiny_folder
                        else real_access(p, mode, **kw))
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), *PROMPT], 2,
            "Cannot read model folder")


def test_model_folder_with_unreadable_weights(monkeypatch, capsys, isolated, tiny_folder):
    """Root reads any file, so the unreadable weights show where they would: in from_pretrained."""
    import transformers

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tiny_folder / "model.safetensors"))

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", denied)
    hostile(capsys, isolated, ["run", "--main", str(tiny_folder), "--method", "pld", *PROMPT], 2,
            "Cannot load the model in")


def fake_gguf(isolated: Path) -> Path:
    path = isolated / "work" / "model.gguf"
    path.write_bytes(empty_gguf(padding=64))
    return path


def test_cache_folder_is_a_file(capsys, monkeypatch, isolated):
    (isolated / "cachefile").write_text("not a folder")
    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(isolated / "cachefile"))
    gguf = fake_gguf(isolated)
    hostile(capsys, isolated, ["run", "--main", str(gguf), *PROMPT], 2, "set TUI_DECODE_CACHE_DIR")


def test_cache_folder_read_only(capsys, monkeypatch, isolated):
    """Root ignores permission bits: the read-only folder shows where it would, in mkdir."""
    gguf = fake_gguf(isolated)
    (isolated / "cache" / "gguf").mkdir(parents=True)
    real_mkdir = os.mkdir

    def read_only(path, *args, **kwargs):
        if str(path).startswith(str(isolated / "cache")):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", read_only)
    hostile(capsys, isolated, ["run", "--main", str(gguf), *PROMPT], 2,
            "read-only file system; set TUI_DECODE_CACHE_DIR")


# -- 6. the converted-model cache: full disk, corruption, a killed conversion -------------------
@pytest.fixture
def fake_conversion(monkeypatch):
    """transformers' GGUF loaders return a tiny model; counts conversions."""
    import transformers

    calls = []
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda *a, **k: tiny_tokenizer())
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: calls.append(1) or tiny_model())
    return calls


def test_conversion_records_and_verifies_checksums(isolated, fake_conversion):
    from decoders.models import gguf_cache

    gguf = fake_gguf(isolated)
    folder = gguf_cache.ensure_converted(gguf)
    marker = json.loads((folder / gguf_cache.MARKER_FILE).read_text())
    assert "model.safetensors" in marker["files"]
    assert gguf_cache.verify_converted(folder) is None
    assert gguf_cache.ensure_converted(gguf) == folder and len(fake_conversion) == 1


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_corrupted_cache_is_reconverted(isolated, fake_conversion, monkeypatch, keep_mtime):
    """Random bytes written into the converted weights: noticed at load, converted afresh. With
    the modification time put back, the sampled hash (first block included) still sees it."""
    from decoders.models import gguf_cache

    monkeypatch.setattr(gguf_cache, "FULL_HASH_LIMIT", 1024)  # hash the tiny weights by sample
    gguf = fake_gguf(isolated)
    folder = gguf_cache.ensure_converted(gguf)
    weights = folder / "model.safetensors"
    stat = weights.stat()
    with weights.open("r+b") as handle:
        handle.seek(16)
        handle.write(os.urandom(64))
    if keep_mtime:
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "model.safetensors does not match its checksum" in gguf_cache.verify_converted(folder)
    messages = []
    gguf_cache.ensure_converted(gguf, lambda m, f=None: messages.append(m))
    assert len(fake_conversion) == 2 and any("damaged" in m for m in messages)
    assert gguf_cache.verify_converted(folder) is None


def test_truncated_cache_is_reconverted(isolated, fake_conversion):
    from decoders.models import gguf_cache

    gguf = fake_gguf(isolated)
    folder = gguf_cache.ensure_converted(gguf)
    with (folder / "model.safetensors").open("r+b") as handle:
        handle.truncate(100)
    assert "wrong size" in gguf_cache.verify_converted(folder)
    gguf_cache.ensure_converted(gguf)
    assert len(fake_conversion) == 2


def test_full_disk_during_conversion(capsys, isolated, fake_conversion, monkeypatch):
    """Fault injection, writer 2: the converted weights hit a full disk part way through."""
    import transformers

    real_save = transformers.PreTrainedModel.save_pretrained

    def save_then_fill(self, folder, *args, **kwargs):
        real_save(self, folder, *args, **kwargs)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", save_then_fill)
    gguf = fake_gguf(isolated)
    hostile(capsys, isolated, ["run", "--main", str(gguf), *PROMPT], 2,
            "No space left on device"[1:])
    assert list((isolated / "cache" / "gguf").iterdir()) == []  # no partial folder, no half copy


def test_full_disk_on_cache_marker(capsys, isolated, fake_conversion, monkeypatch):
    """Fault injection, writer 3: the marker (checksums) file, written atomically, hits a full disk."""
    full_disk_after(monkeypatch, 10)
    gguf = fake_gguf(isolated)
    hostile(capsys, isolated, ["run", "--main", str(gguf), *PROMPT], 2,
            "no space left on device; free disk space or set TUI_DECODE_CACHE_DIR")
    assert list((isolated / "cache" / "gguf").iterdir()) == []


def test_killed_conversion_leaves_partial_cleaned_on_next_start(isolated, fake_conversion):
    """A conversion killed by SIGTERM leaves its partial folder (its process is gone): the next
    start removes it at once, while one of a live process (pid 1) stays."""
    from decoders.models import gguf_cache

    gguf = fake_gguf(isolated)
    root = isolated / "cache" / "gguf"
    root.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    target = gguf_cache.converted_folder(gguf).name
    stale = root / f"{gguf_cache.PARTIAL_PREFIX}{target}-{dead.pid}-deadbeef"
    live = root / f"{gguf_cache.PARTIAL_PREFIX}{target}-1-cafef00d"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(bytes(1000))
    gguf_cache.ensure_converted(gguf)
    assert not stale.exists() and live.exists()
    assert (root / target / gguf_cache.MARKER_FILE).is_file()


@pytest.fixture
def conversions(monkeypatch):
    """Counts the conversions `ensure_converted` starts (the loads of the copy are not counted)."""
    from decoders.models import gguf_cache

    calls = []
    real = gguf_cache._convert

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(gguf_cache, "_convert", counted)
    return calls


def _damage_the_middle(weights: Path) -> bytes:
    """Overwrite bytes in the middle of ``weights`` (its modification time moves); the old bytes."""
    before = weights.read_bytes()
    with weights.open("r+b") as handle:
        handle.seek(len(before) // 2)
        handle.write(os.urandom(min(4096, len(before) // 4)))
    return before


@pytest.mark.parametrize("marker_files", [None, ["config.json"]])
def test_a_marker_that_does_not_check_the_weights_is_not_trusted(isolated, fake_conversion, conversions,
                                                                 marker_files):
    """Issue 26: with `files` gone from the marker (or listing only config.json), damaged weights
    were loaded as they were and their checksums recorded, trusted for good. The folder's own
    files are what is checked: such a copy is converted afresh."""
    from decoders.models import gguf_cache

    gguf = fake_gguf(isolated)
    folder = gguf_cache.ensure_converted(gguf)
    marker = folder / gguf_cache.MARKER_FILE
    record = json.loads(marker.read_text())
    if marker_files is None:
        del record["files"]
    else:
        record["files"] = {name: record["files"][name] for name in marker_files}
    marker.write_text(json.dumps(record))
    good = _damage_the_middle(folder / "model.safetensors")
    assert gguf_cache.verify_converted(folder) is not None
    messages = []
    assert gguf_cache.ensure_converted(gguf, lambda m, f=None: messages.append(m)) == folder
    assert len(conversions) == 2 and any("damaged" in m for m in messages), messages
    assert (folder / "model.safetensors").read_bytes() == good
    assert gguf_cache.verify_converted(folder) is None


def test_a_device_map_typo_keeps_a_good_cached_copy(capsys, isolated, fake_conversion, conversions):
    """Issue 26: any error loading the cached copy was taken for a damaged cache, reconverted
    (97 s for the bundled model), and then the same error came anyway."""
    pytest.importorskip("accelerate")
    from decoders.models import gguf_cache

    gguf = fake_gguf(isolated)
    folder = gguf_cache.ensure_converted(gguf)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    device_map = isolated / "work" / "map.json"
    device_map.write_text(json.dumps({"model.nosuch": "cpu"}))
    assert main(["run", "--main", str(gguf), *PROMPT, "--device-map", str(device_map)]) == 2
    err = one_line(capsys)
    assert "'model.nosuch'" in err and "device map" in err
    assert len(conversions) == 1 and {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_damaged_copy_in_a_read_only_cache_is_one_line(capsys, isolated, fake_conversion, monkeypatch):
    """Issue 26: EROFS while discarding a damaged copy ended in a crash report (exit 1)."""
    from decoders.models import gguf_cache

    gguf = fake_gguf(isolated)
    folder = gguf_cache.ensure_converted(gguf)
    _damage_the_middle(folder / "model.safetensors")
    real_unlink = Path.unlink

    def read_only(self, *args, **kwargs):
        if str(self).startswith(str(isolated / "cache")):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", read_only)
    hostile(capsys, isolated, ["run", "--main", str(gguf), *PROMPT], 2,
            "cannot be removed (read-only file system); set TUI_DECODE_CACHE_DIR to a writable folder")


def test_a_full_disk_while_safetensors_writes_is_one_line(capsys, isolated, fake_conversion, monkeypatch):
    """Issue 26: safetensors' SafetensorError (a full disk mid-write) is no OSError: exit 1."""
    import transformers
    from safetensors import SafetensorError

    def full(self, folder, *args, **kwargs):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
                              'message: "No space left on device" })')

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", full)
    gguf = fake_gguf(isolated)
    hostile(capsys, isolated, ["run", "--main", str(gguf), *PROMPT], 2,
            "No space left on device\" }); free disk space or set TUI_DECODE_CACHE_DIR")
    assert list((isolated / "cache" / "gguf").iterdir()) == []


def test_a_junk_file_where_the_copy_goes_is_replaced(isolated, fake_conversion, conversions):
    """Issue 26: a file where the converted folder goes cost a whole conversion, then "free disk
    space", again on every run."""
    from decoders.models import gguf_cache

    gguf = fake_gguf(isolated)
    target = gguf_cache.converted_folder(gguf)
    target.parent.mkdir(parents=True)
    target.write_text("junk")
    assert gguf_cache.ensure_converted(gguf) == target
    assert target.is_dir() and gguf_cache.verify_converted(target) is None and len(conversions) == 1


# -- 7. the error boundary: crashes, interrupts, signals ----------------------------------------
def test_crash_is_one_line_exit_1_and_a_report(monkeypatch, capsys, isolated):
    import tui_decode.cli.main as cli

    def broken(args):
        raise RuntimeError("something inside broke")

    monkeypatch.setattr(cli, "cmd_families", broken)
    hostile(capsys, isolated, ["families"], 1, "internal error: RuntimeError: something inside broke")
    reports = list((isolated / "cache").glob("crash-*.txt"))
    assert len(reports) == 1
    text = reports[0].read_text()
    assert "Traceback" in text and "something inside broke" in text and "broken" in text


def test_app_crash_is_one_line_exit_1_and_a_report(monkeypatch, capsys, isolated):
    """An exception inside the app: no Textual traceback on the terminal, exit 1, a crash report."""
    import tui_decode.app as app_mod
    from decoders.core.errors import DecodeError

    def no_model(spec, progress):
        raise DecodeError("no model in this test")

    async def broken_mount(self):
        await self.main_screen.set_up.wait()
        raise RuntimeError("the app broke inside")

    real_run = app_mod.TuiDecodeApp.run
    monkeypatch.setattr(app_mod, "default_family_loader", no_model)
    monkeypatch.setattr(app_mod.TuiDecodeApp, "on_mount", broken_mount)
    monkeypatch.setattr(app_mod.TuiDecodeApp, "run", lambda self, **kw: real_run(self, headless=True, **kw))
    hostile(capsys, isolated, ["--open", str(isolated / "work" / "run.json")], 1,
            "internal error: RuntimeError: the app broke inside")
    reports = list((isolated / "cache").glob("crash-*.txt"))
    assert len(reports) == 1
    text = reports[0].read_text()
    assert "Traceback" in text and "broken_mount" in text


def test_a_crash_while_the_first_screen_mounts_ends_in_one_line_and_a_report(monkeypatch, capsys, isolated):
    """Issue 26: an exception raised while the first screen mounted (a saved run the statistics
    pane could not show) left a blank screen that ignored ctrl+q and SIGTERM, with no report."""
    import tui_decode.app as app_mod
    from tui_decode.widgets.stats_pane import StatsPane

    def broken(self, result):
        raise RuntimeError("the pane broke on this run")

    real_run = app_mod.TuiDecodeApp.run
    monkeypatch.setattr(StatsPane, "show_result", broken)
    monkeypatch.setattr(app_mod.TuiDecodeApp, "run", lambda self, **kw: real_run(self, headless=True, **kw))
    assert _within(30, lambda: main(["--open", str(isolated / "work" / "run.json")])) == 1
    err = one_line(capsys)
    assert "internal error: RuntimeError: the pane broke on this run" in err
    reports = list((isolated / "cache").glob("crash-*.txt"))
    assert len(reports) == 1 and "broken" in reports[0].read_text()


def test_crash_report_on_a_full_disk_falls_back(monkeypatch, capsys, isolated):
    """Fault injection, writer 4: the crash report itself cannot be written where it should."""
    import tempfile

    import tui_decode.cli.main as cli

    monkeypatch.setattr(cli, "cmd_families", lambda args: 1 / 0)
    (isolated / "fallback").mkdir()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(isolated / "fallback"))
    from decoders.records import atomic

    real = atomic.write_bytes

    def full_in_cache(path, data, **kwargs):
        if Path(path).parent == isolated / "cache":
            raise atomic.write_error(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        return real(path, data, **kwargs)

    monkeypatch.setattr(atomic, "write_bytes", full_in_cache)
    hostile(capsys, isolated, ["families"], 1, f"details in {isolated / 'fallback'}")


def test_keyboard_interrupt_is_130(monkeypatch, capsys, isolated):
    import tui_decode.cli.main as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_families", interrupted)
    hostile(capsys, isolated, ["families"], 130, "interrupted")


@pytest.mark.slow  # a process of its own: seconds to start, load and end
def test_sigterm_is_143(isolated):
    """A real SIGTERM while the CLI blocks (reading a prompt from a FIFO whose writer never writes;
    one with no writer at all is refused at once, issue 26)."""
    fifo = isolated / "work" / "fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # a writer that stays and says nothing
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "tui_decode", "run", "--method", "pld",
                             "--prompt-file", str(fifo)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    seen = 0
    while time.time() < deadline and seen < 3:  # imports done, blocked reading the FIFO for 0.6 s
        seen = seen + 1 if _blocked_in_read(proc.pid) else 0
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    os.close(writer)
    assert proc.returncode == 143, err
    assert err.strip() == "tui-decode: terminated" and "Traceback" not in err


@pytest.mark.slow  # a process of its own: seconds to start, load and end
def test_sigterm_then_sigcont_in_the_app_is_143_and_restores_the_terminal(isolated):
    """`timeout` stops a program with SIGTERM and then SIGCONT: the app leaves through its own exit
    (terminal restored, "terminated", 143), not through an exception inside its event loop."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: the app on a saved run, in a terminal of its own
        os.environ["PYTHONPATH"] = str(REPO)
        os.chdir(REPO)
        os.execv(sys.executable, [sys.executable, "-m", "tui_decode", "--open", str(RUN_DATA)])
    out = b""
    deadline = time.time() + 120
    while time.time() < deadline and b"opened run_spec.json" not in out:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    assert b"opened run_spec.json" in out, out[-2000:]
    os.kill(pid, signal.SIGTERM)
    os.kill(pid, signal.SIGCONT)
    done, status = 0, 0
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if select.select([fd], [], [], 0.2)[0]:
                out += os.read(fd, 65536)
        except OSError:
            break
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    while not done and time.time() < deadline:  # the terminal closed first
        done, status = os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    os.close(fd)
    if not done:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the app did not leave within 60 s of SIGTERM")
    assert os.waitstatus_to_exitcode(status) == 143, out[-2000:]
    assert b"tui-decode: terminated" in out and b"Traceback" not in out and b"internal error" not in out
    assert not list((isolated / "cache").glob("crash-*.txt"))


def _blocked_in_read(pid: int) -> bool:
    """The process is waiting in read(2): /proc/PID/syscall starts with read's number (x86-64, arm64)."""
    try:
        return Path(f"/proc/{pid}/syscall").read_text().split()[0] in ("0", "63")
    except (OSError, IndexError):
        return False


KILLED_CONVERSION = """
import sys, time
from pathlib import Path
import transformers
from tests.support.tiny import tiny_model, tiny_tokenizer
from tui_decode.cli.main import main

transformers.AutoTokenizer.from_pretrained = lambda *a, **k: tiny_tokenizer()
transformers.AutoModelForCausalLM.from_pretrained = lambda *a, **k: tiny_model()
real_save = transformers.PreTrainedModel.save_pretrained

def save_then_hang(self, folder, *args, **kwargs):
    real_save(self, folder, *args, **kwargs)
    Path(sys.argv[2]).write_text(folder)  # the partial folder is half written: kill me now
    time.sleep(600)

transformers.PreTrainedModel.save_pretrained = save_then_hang
sys.exit(main(["run", "--main", sys.argv[1], "--method", "pld", "--prompt", "w5"]))
"""


@pytest.mark.slow  # a process of its own, killed mid-conversion
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_kill_during_conversion(isolated, fake_conversion, sig):
    """A real conversion (tiny model behind transformers' loaders) killed while its partial folder
    is half written. SIGTERM: the CLI unwinds, removes the partial folder and exits 143. SIGKILL
    cannot be caught: the partial folder stays, and the next start removes it (its process is gone)."""
    from decoders.models import gguf_cache

    gguf = fake_gguf(isolated)
    ready = isolated / "ready"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CONVERSION, str(gguf), str(ready)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while not ready.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert ready.exists(), proc.communicate()[1] if proc.poll() is not None else "timed out"
    partial = Path(ready.read_text())
    assert partial.name.startswith(gguf_cache.PARTIAL_PREFIX) and partial.is_dir()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    root = isolated / "cache" / "gguf"
    if sig == signal.SIGTERM:
        assert proc.returncode == 143 and err.strip().endswith("tui-decode: terminated"), err
        assert "Traceback" not in err
        assert not partial.exists()
    else:
        assert proc.returncode == -signal.SIGKILL and partial.exists()
    gguf_cache.ensure_converted(gguf)  # the next start
    assert [p.name for p in root.iterdir()] == [gguf_cache.converted_folder(gguf).name]


# -- 8. the bench: prompts file, --out, counts, and its report writer ----------------------------
BENCH_PROMPT = {"question_id": 1, "category": "writing", "turns": ["w5 w6 w7 w5 w6"]}


def bench_prompts(isolated: Path, data: bytes | None = None) -> str:
    path = isolated / "work" / "prompts.jsonl"
    path.write_bytes(data if data is not None else (json.dumps(BENCH_PROMPT) + "\n").encode())
    return str(path)


@pytest.mark.parametrize("data,extra,message", [
    ((json.dumps(BENCH_PROMPT) + "\n").encode("utf-16"), [], "is not UTF-8 text (it looks like UTF-16)"),
    (b'{"question_id": 1, "category": "caf\xe9", "turns": ["x"]}\n', [], "byte 0xe9"),
    (None, ["--out", "{work}/notes.txt"], "it is a file, not a folder"),
    (None, ["--out", "{work}/notes.txt/deeper"], "is not a folder"),
    (None, ["--bandwidth-mb", "1000000000"], "bandwidth_mb must be an integer <= 16384"),
    (None, ["--threads", "1000000"], "threads must be an integer <= 1024"),
    (None, ["--repeats", "1000000000"], "repeats must be an integer <= 100"),
])
def test_bench_bad_input_before_any_model_time(monkeypatch, capsys, isolated, tiny_folder, data, extra, message):
    import decoders.models.family

    monkeypatch.setattr(decoders.models.family, "load_family", lambda *a, **k: pytest.fail("model loaded"))
    path = bench_prompts(isolated, data)
    extra = [arg.format(work=isolated / "work") for arg in extra]
    hostile(capsys, isolated, ["bench", "--prompts", path, "--main", str(tiny_folder), *extra], 2, message)


def test_bench_prompts_dev_zero(capsys, isolated, tiny_folder):
    hostile(capsys, isolated, ["bench", "--prompts", "/dev/zero", "--main", str(tiny_folder)], 2,
            "cannot read the prompts file /dev/zero: it is a character device, not a file; give a Spec-Bench")


def test_full_disk_on_bench_report_keeps_old_report_and_prints_tables(monkeypatch, capsys, isolated, tiny_folder):
    """Fault injection, writer 5: the bench's report.md / report.json on a full disk, mid-write."""
    out = isolated / "work" / "bench-out"
    out.mkdir()
    (out / "report.md").write_text("# an earlier report\n")
    (out / "report.json").write_text('{"schema": "earlier"}\n')
    full_disk_after(monkeypatch)
    stdout = hostile(capsys, isolated, ["bench", "--prompts", bench_prompts(isolated), "--main", str(tiny_folder),
                                        "--methods", "ar,pld", "--max-new-tokens", "4", "--bandwidth-mb", "1",
                                        "--record-overhead-every", "0", "--out", str(out)], 2,
                     f"nothing was written to the report {out / 'report.json'}: no space left on device")
    assert "Overall" in stdout  # the measurements are still shown
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md"]
