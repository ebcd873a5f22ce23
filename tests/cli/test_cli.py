"""The headless command line: each bad input is one line on stderr and exit code 2."""

from __future__ import annotations

import json
import re

import pytest

from tui_decode.cli.main import main

PROMPT = ["--prompt", "Say hi."]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv,message", [
    (["run", "--method", "pld", "--gamma", "0", *PROMPT], "gamma must be an integer >= 1, got 0; set --gamma to 1 or more"),
    (["run", "--method", "pld", "--num-pred", "0", *PROMPT], "num_pred must be an integer >= 1"),
    (["run", "--method", "jacobi", "--block", "-1", *PROMPT], "block must be an integer >= 1"),
    (["run", "--max-new-tokens", "0", *PROMPT], "max_new_tokens must be an integer >= 1"),
    (["run", "--method", "pld", "--ngram-min", "3", "--ngram-max", "2", *PROMPT],
     "ngram_min (3) is larger than ngram_max (2); set --ngram-min <= --ngram-max"),
    (["run", "--mode", "sampling", "--temperature", "0", *PROMPT], "temperature must be > 0 in sampling mode"),
    (["run", "--family", "no-such-family", *PROMPT], "no-such-family"),
    (["run", "--main", "/nonexistent/model/folder", *PROMPT], "/nonexistent/model/folder"),
    (["run", "--method", "warp", *PROMPT], "invalid choice: 'warp'"),
    (["run", "--prompt-file", "/nonexistent/prompt.txt"], "cannot read the prompt file /nonexistent/prompt.txt"),
    (["run", "--method", "pld"], "no prompt given; pass --prompt TEXT or --prompt-file PATH"),
    (["run", "--prompt", "   "], "the prompt is empty"),
    (["run", "--threads", "0", *PROMPT], "--threads must be 1..1024, got 0"),
    (["run", "--mode", "sampling", "--temperature", "-1", *PROMPT],
     "temperature must be > 0 in sampling mode (at least 0.01), got -1.0; set --temperature to a positive value"),
    (["run", "--self-draft-layer", "0", *PROMPT], "--self-draft-layer must be 1..1024"),
    (["run", "--self-draft-layer", str(2**63), *PROMPT], "--self-draft-layer must be 1..1024"),  # issue 26: after the load
    (["run", "--threads", "100000", *PROMPT], "--threads must be 1..1024, got 100000"),
    (["run", "--mode", "sampling", "--temperature", "100.0001", *PROMPT], "<= 100, got 100.0001"),  # was "got 100"
    (["run", "--bogus", "3", *PROMPT], "unrecognized arguments: --bogus 3 (see `tui-decode run --help`)"),
    (["bench", "--prompts", "x.jsonl", "--nope"], "unrecognized arguments: --nope (see `tui-decode bench --help`)"),
    (["--nope"], "unrecognized arguments: --nope (see `tui-decode --help`)"),
    (["--threads", "0"], "--threads must be 1..1024, got 0"),  # the app: refused before it opens
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert out == ""


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("tui-decode 0.")


def test_speculative_without_helper_says_how_to_get_one(capsys, smollm2):
    code, _, err = run_cli(capsys, "run", "--main", "bundled", "--method", "spec", *PROMPT)  # no family: no helper
    assert code == 2
    assert "has no helper model" in err and "--self-draft-layer" in err


def test_prompt_longer_than_context(capsys, tmp_path, smollm2):
    long_prompt = tmp_path / "long.txt"
    long_prompt.write_text("word " * 9000)
    code, _, err = run_cli(capsys, "run", "--method", "pld", "--prompt-file", str(long_prompt))
    assert code == 2
    assert "the model's context is 8192; shorten the prompt" in err


def test_budget_beyond_context(capsys, smollm2):
    code, _, err = run_cli(capsys, "run", "--method", "pld", "--max-new-tokens", "9000", *PROMPT)
    assert code == 2
    assert "exceeds the model's context of 8192; set max_new_tokens to" in err


def test_hub_unreachable_names_the_offline_alternatives(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run_cli(capsys, "run", "--main", "HuggingFaceTB/SmolLM2-360M-Instruct", *PROMPT)
    assert code == 2
    assert "--main" in err and err.count("\n") == 1


def test_json_to_stdout_has_summary_and_both_runs(capsys, smollm2):
    code, out, _ = run_cli(capsys, "run", "--method", "pld", "--max-new-tokens", "8", "--json", "-", *PROMPT)
    assert code == 0
    data = json.loads(out)
    assert set(data["runs"]) == {"baseline", "method"}
    assert data["summary"]["tokens"] == len(data["runs"]["method"]["ids"]) <= 8
    assert data["summary"]["identical"] is True


def test_run_prints_the_output_and_figures_that_agree_with_the_sentence(capsys, smollm2):
    """The decoded text first; then the decode speedup with its spread (the figure the sentence
    reads), the end-to-end one, ttft and decode ms/token each beside the baseline's, and the drift;
    the run records the threads it was timed with."""
    import torch

    before = torch.get_num_threads()
    try:
        code, out, _ = run_cli(capsys, "run", "--method", "pld", "--max-new-tokens", "8", "--threads", "1", "--raw",
                               "--json", "-", *PROMPT)
        data = json.loads(out)
        assert code == 0 and data["family"]["threads"] == 1
        code, out, _ = run_cli(capsys, "run", "--method", "pld", "--max-new-tokens", "8", "--threads", "1", "--raw",
                               *PROMPT)
    finally:
        torch.set_num_threads(before)
    assert code == 0
    text = data["runs"]["method"]["text"]
    flat = " ".join(out.split())
    assert "output" in out and " ".join(text.split()) in flat
    s = data["summary"]
    assert s["speedup_decode"] is not None and s["speedup_spread"] is not None
    assert re.search(r"decode speedup vs autoregressive\s*│\s*\d+\.\d\dx \+/- \d+\.\d\d", out)
    for label in ("end-to-end speedup (prefill included)", "time to first token, ms", "decode ms / token",
                  "pairing", "prompt tokens"):
        assert label in flat
    assert "(baseline " in flat and "wall speedup" not in flat
    assert "interleaved with its baseline" in flat and s["pairing"] == "interleaved"


def test_the_app_sets_torch_threads_before_it_loads_a_family():
    """`tui-decode --threads N`: the loader sets torch's threads, and a thread that decodes later
    (the app decodes in threads of its own) runs with N."""
    import threading

    import torch

    from tui_decode.cli.main import build_parser
    from tui_decode.cli.main import flags_given as _flags_given
    from tui_decode.cli.views import DecodeFlags
    from tui_decode.workers.decode import threads_loader

    args = build_parser().parse_args(["--threads", "1"])
    assert args.threads == 1 and not _flags_given(DecodeFlags.of(args))  # not a decoding flag: the app's own start applies
    before = torch.get_num_threads()
    seen = []

    def in_thread(fn):
        thread = threading.Thread(target=fn)
        thread.start()
        thread.join()

    try:
        in_thread(lambda: seen.append(threads_loader(1, lambda spec, progress: "family")("spec", None)))
        in_thread(lambda: seen.append(torch.get_num_threads()))
    finally:
        in_thread(lambda: torch.set_num_threads(before))
    assert seen == ["family", 1]


def test_the_app_takes_decoding_flags_at_launch():
    from tui_decode.cli.main import build_parser, decode_params
    from tui_decode.cli.main import flags_given as _flags_given
    from tui_decode.cli.views import DecodeFlags

    args = build_parser().parse_args(["--method", "pld", "--max-new-tokens", "32"])
    assert _flags_given(DecodeFlags.of(args)) and decode_params(DecodeFlags.of(args)).max_new_tokens == 32
    assert not _flags_given(DecodeFlags.of(build_parser().parse_args(["--family", "smollm2-135m"])))


def test_run_repeats_pools_the_speedups_of_runs_each_beside_its_own_baseline(capsys, tmp_path):
    from tests.support.tiny import save_tiny_model

    folder = save_tiny_model(tmp_path / "tiny")
    code, out, _ = run_cli(capsys, "run", "--main", str(folder), "--method", "pld", "--max-new-tokens", "12",
                           "--repeats", "3", "--threads", "1", "--prompt", "w1 w2 w3 w1 w2 w3 w1")
    assert code == 0
    flat = " ".join(out.split())
    assert "3 runs pooled" in flat and re.search(r"pooled │ \d+\.\d{3}x \+/- \d+\.\d{3}", flat)
    assert re.search(r"(faster than|slower than|no measurable difference from) autoregressive.* over 3 runs", flat)


def test_run_warms_the_prompt_up_before_its_first_timed_run(capsys, tmp_path, monkeypatch):
    """As the bench does (issue 36): the prompt's first decode, untimed, then every run measures alike."""
    from decoders.engine import Engine
    from tests.support.tiny import save_tiny_model

    calls = []
    warm, stream = Engine.warm, Engine.stream

    def warming(self, prompt, params, *args, **kwargs):
        calls.append(("warm", prompt, params.method, params.max_new_tokens))
        return warm(self, prompt, params, *args, **kwargs)

    def streaming(self, prompt, params, *args, **kwargs):
        calls.append(("run", prompt, params.method, params.max_new_tokens))
        return stream(self, prompt, params, *args, **kwargs)

    monkeypatch.setattr(Engine, "warm", warming)
    monkeypatch.setattr(Engine, "stream", streaming)
    folder = save_tiny_model(tmp_path / "tiny")
    code, _, _ = run_cli(capsys, "run", "--main", str(folder), "--method", "pld", "--max-new-tokens", "6",
                         "--repeats", "2", "--threads", "1", "--prompt", "w1 w2 w3 w1 w2 w3 w1")
    assert code == 0
    prompt = "w1 w2 w3 w1 w2 w3 w1"
    assert calls == [("warm", prompt, "pld", 6), ("run", prompt, "pld", 6), ("run", prompt, "pld", 6)]


@pytest.mark.parametrize("value,message", [("0", "--repeats must be in 1..20, got 0"),
                                           ("21", "--repeats must be in 1..20, got 21"),
                                           ("lots", "--repeats takes a whole number in 1..20, got 'lots'")])
def test_run_repeats_is_bounded(capsys, value, message):
    code, _, err = run_cli(capsys, "run", "--repeats", value, *PROMPT)
    assert code == 2 and message in err and "Traceback" not in err


def test_stdout_closed_early_is_exit_141_as_the_readme_says():
    """Issue 26: `tui-decode families | head -1` (rich's broken-pipe handler) exited 1 without a word."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "tui_decode", "families"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and b"Traceback" not in err, err
