"""Issue 26: a truncated or crafted GGUF file is one line saying it is truncated or damaged and how
to fix it, before anything is dequantised or written to the cache; not the parser's internals
("unpack_from requires a buffer of at least 101 bytes ...", "cannot reshape array ...")."""

from __future__ import annotations

import struct

import pytest

from decoders.models.bundled import bundled_gguf_path
from tests.support.gguf import empty_gguf, gguf_with_a_tensor
from tui_decode.cli.main import main


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path


def bundled_prefix(n: int) -> bytes:
    with open(bundled_gguf_path(), "rb") as handle:
        return handle.read(n)


@pytest.mark.parametrize("data,what", [
    (lambda: bundled_prefix(100), "its header ends early or holds impossible sizes (100 bytes in all)"),
    (lambda: bundled_prefix(5000), "its header ends early or holds impossible sizes (5000 bytes in all)"),
    (lambda: bundled_prefix(2_000_000), "its tensors run to byte 98362432 but the file ends at byte 2000000"),
    (lambda: b"GGUF", "its header ends early"),
    (lambda: b"GGUF" + struct.pack("<IQQ", 3, 2**62, 2**62), "its header ends early or holds impossible sizes"),
    (lambda: b"GGUF" + struct.pack("<IQQQ", 3, 1, 1, 2**60) + b"abc", "its header ends early or holds impossible"),
    (lambda: empty_gguf()[:60], "its header ends early"),
    (lambda: gguf_with_a_tensor(100), "its tensors run to byte 256 but the file ends at byte 228"),
])
def test_a_truncated_or_crafted_gguf_is_one_line(capsys, isolated, data, what):
    path = isolated / "model.gguf"
    path.write_bytes(data())
    assert main(["run", "--main", str(path), "--method", "ar", "--prompt", "hi"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"the GGUF file {path} is truncated or damaged: {what}" in err, err
    assert err.rstrip().endswith("download it again, or pass another .gguf file"), err
    assert "unpack_from" not in err and "reshape" not in err and "buffer" not in err
    assert not any((isolated / "cache" / "gguf").glob("*"))  # nothing written, nothing dequantised


def test_another_gguf_version_keeps_the_reader_s_words(capsys, isolated):
    path = isolated / "model.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 99, 0, 0))
    assert main(["run", "--main", str(path), "--method", "ar", "--prompt", "hi"]) == 2
    assert "is GGUF v99; this reader handles v2 and v3" in capsys.readouterr().err


def test_a_whole_gguf_passes_the_check(isolated):
    from decoders.models.gguf_check import check_gguf_intact

    for data in (empty_gguf(), gguf_with_a_tensor(128)):
        path = isolated / "whole.gguf"
        path.write_bytes(data)
        check_gguf_intact(path)
    check_gguf_intact(bundled_gguf_path())
