"""Issue 26: the saved-run bound follows what the app can hold. It was 1 GiB whatever the memory,
20 times what a machine could open (a valid 54 MB run took 2.2 GB in the app). Now: free memory
over the bytes of memory the app holds per byte of a run (`bounds.MEMORY_PER_BYTE`, measured), at
most `bounds.RUN_BYTES_CAP`; a file past it is one line naming its size and the bound, refused
before it is read. A run holds at most as many tokens and iterations as max_new_tokens allows."""

from __future__ import annotations

import pytest

from decoders.core.errors import DecodeError
from decoders.records import bounds, inputs
from decoders.records.run import RunResult
from tests.support.runs import one_token_run, write_run
from tui_decode.cli.main import main

MiB = 1 << 20


@pytest.fixture
def free_memory(monkeypatch):
    """The host's free memory, as the bound reads it, set by the test."""
    import decoders.core.host_memory as host

    def set_free(n: int | None) -> None:
        monkeypatch.setattr(host, "host_available_memory", lambda: n)

    return set_free


def test_the_bound_follows_free_memory_up_to_the_cap():
    per = bounds.MEMORY_PER_BYTE
    assert bounds.max_run_bytes(available=64 * MiB * per) == 64 * MiB
    assert bounds.max_run_bytes(available=100 * 1024 * MiB) == bounds.RUN_BYTES_CAP
    assert bounds.max_run_bytes(available=0) == MiB  # a floor: a small run still opens
    assert bounds.RUN_BYTES_CAP <= 256 * MiB and 8 <= per <= 64


def test_a_run_past_the_bound_is_refused_unread_naming_size_and_bound(tmp_path, free_memory, monkeypatch):
    data = one_token_run(8)
    data["prompt"] = "w1 " * 1_000_000  # 3 MB, a valid prompt
    path = write_run(tmp_path / "big.json", data)
    free_memory(32 * MiB)  # the bound: 2 MiB at 16 bytes a byte
    monkeypatch.setattr(inputs, "read_upto", lambda *a: pytest.fail("read before its size was checked"))
    with pytest.raises(DecodeError) as err:
        RunResult.load(path)
    message = str(err.value)
    assert message.startswith(f"{path} is 3.0 MB, more than the 2.1 MB a saved run may be here"), message
    assert f"about {bounds.MEMORY_PER_BYTE} bytes of memory per byte of a run, and 34 MB is free" in message


def test_open_of_a_run_past_the_bound_is_one_line_and_exit_2(capsys, tmp_path, free_memory):
    data = one_token_run(8)
    data["prompt"] = "w1 " * 1_000_000
    path = write_run(tmp_path / "big.json", data)
    free_memory(32 * MiB)
    assert main(["--open", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more than the 2.1 MB a saved run may be here" in err, err
    free_memory(None)  # memory unknown: the cap alone, and the run opens as far as reading goes
    assert RunResult.load(path).prompt.startswith("w1 w1")


def test_a_run_of_more_tokens_than_a_run_can_emit_is_refused(tmp_path):
    from decoders.core.declarations import COMMON_PARAMS

    assert next(p for p in COMMON_PARAMS if p.name == "max_new_tokens").high == bounds.MAX_TOKENS
    path = write_run(tmp_path / "many.json", one_token_run(bounds.MAX_TOKENS + 2))
    with pytest.raises(DecodeError, match=r"runs.baseline.\w+ holds more than 131072 items"):
        RunResult.load(path)


@pytest.mark.parametrize("change,field", [
    (lambda d: d["runs"]["method"]["iters"][0].__setitem__("draft", [[1, "a", None, 0.5, 1.0, "acc"]] * 5000),
     "runs.method.iters[0].draft holds more than 4096 items"),
    (lambda d: d["runs"]["method"]["iters"][0]["emit"][0].__setitem__(1, "y" * 5000),
     "runs.method.iters[0].emit[0][1]"),
    (lambda d: d.__setitem__("prompt_ids", [1] * (bounds.MAX_PROMPT + 1)), "prompt_ids holds more than 4194304 items"),
])
def test_one_iteration_or_token_past_any_method_s_widest_is_refused(tmp_path, change, field):
    """A 10-million-row draft would be laid out in the table and the detail pane; a 100 MB token
    folded line by line in the stream."""
    data = one_token_run(4)
    change(data)
    with pytest.raises(DecodeError) as err:
        RunResult.load(write_run(tmp_path / "odd.json", data))
    assert field in str(err.value), str(err.value)


def test_the_fast_read_and_the_plain_read_give_the_same_run(tmp_path):
    """A current file is read in one typed pass; a file of schema 1, or one that fails its checks,
    goes through plain JSON (migrated, its bad field named): both give the same run."""
    import json

    import msgspec

    from decoders.records import files
    from tests.support.app import DATA

    for name in ("run_spec.json", "run_pld.json", "run_jacobi.json", "run_ar.json"):
        saved = RunResult.load(DATA / name).save(tmp_path / name)
        raw = saved.read_bytes()
        fast = files._read_typed(raw, None)
        plain = files.from_plain(json.loads(raw))
        assert fast is not None and msgspec.to_builtins(fast) == msgspec.to_builtins(plain)
        assert fast.summary.extras == plain.summary.extras
