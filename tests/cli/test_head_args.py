"""A trained head from the command line and families.toml: checked before any model loads."""

from __future__ import annotations

import pytest

from decoders.models.drafts import TrainedHead, head_of
from decoders.models.families import resolve_family
from tui_decode.cli.main import build_parser
from tui_decode.cli.main import main as cli_main
from tui_decode.cli.model_args import family_spec
from tui_decode.cli.views import ModelFlags


def test_head_flag_asks_for_the_head_draft(tmp_path):
    args = build_parser().parse_args(["run", "--head", str(tmp_path), "--prompt", "x"])
    spec = family_spec(ModelFlags.of(args))
    assert spec.self_draft == "head" and spec.head == str(tmp_path) and spec.helper is None


def test_a_head_that_is_no_folder_is_one_line_before_loading(tmp_path, capsys):
    assert cli_main(["run", "--head", str(tmp_path / "missing"), "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert "--head" in err and "is not a folder" in err and err.count("\n") == 1
    assert cli_main(["run", "--head", str(tmp_path), "--self-draft", "int4", "--prompt", "x"]) == 2
    assert "not both" in capsys.readouterr().err


def test_families_toml_head_is_the_draft(tmp_path, monkeypatch):
    (tmp_path / "families.toml").write_text(f'[families.h]\nmain = "bundled"\nhead = "{tmp_path}"\n')
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path))
    spec = resolve_family("h")
    assert spec.self_draft == "head" and spec.head == str(tmp_path)
    from decoders.core.errors import DecodeError

    (tmp_path / "families.toml").write_text('[families.bad]\nmain = "bundled"\nhead = "x"\nself_draft_layer = 3\n')
    with pytest.raises(DecodeError, match=r"\[families.bad\] sets `head` and another draft; keep one"):
        resolve_family("bad")


def test_a_hub_id_is_taken_as_a_head_and_a_path_like_one_is_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["run", "--head", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "--prompt", "x"])
    assert family_spec(ModelFlags.of(args)).head == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    for bad in ("a/b/c", "../x", "org/"):
        args = build_parser().parse_args(["run", "--head", bad, "--prompt", "x"])
        with pytest.raises(Exception, match="is not a folder"):
            family_spec(ModelFlags.of(args))


def test_fr_spec_sizes_are_bounded_and_need_each_other(tmp_path, capsys, monkeypatch):
    (tmp_path / "freq.pt").write_bytes(b"ranking")  # its ids are read once the model loads
    args = build_parser().parse_args(["run", "--head", str(tmp_path), "--head-vocab", "8192", "--head-vocab-from",
                                      str(tmp_path / "freq.pt"), "--prompt", "x"])
    spec = family_spec(ModelFlags.of(args))
    assert spec.draft == TrainedHead(folder=str(tmp_path), vocab=8192, vocab_from=str(tmp_path / "freq.pt"))
    for argv, message in ((["--head-vocab", "0"], "--head-vocab must be 1..1048576"),
                          (["--head-vocab", "99999999999"], "--head-vocab must be 1..1048576"),
                          (["--head-vocab-from", "x.pt"], "--head-vocab-from ranks the tokens for --head-vocab N"),
                          (["--head-vocab", "8", "--head-vocab-from", " "], "--head-vocab-from is empty")):
        assert cli_main(["run", "--head", str(tmp_path), *argv, "--prompt", "x"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "families.toml").write_text('[families.f]\nmain = "bundled"\nhead = "x"\nhead_vocab = 0\n')
    from decoders.core.errors import DecodeError

    with pytest.raises(DecodeError, match=r"\[families.f\] .*`head_vocab` is 0; give 1..1048576"):
        resolve_family("f")
    (tmp_path / "families.toml").write_text('[families.f]\nmain = "bundled"\nhead = "x"\nhead_vocab = 64\n'
                                           'head_vocab_from = "r.json"\n')
    assert resolve_family("f").draft == TrainedHead(folder="x", vocab=64, vocab_from="r.json")


def test_a_bad_ranking_is_one_line_before_the_model_loads(tmp_path, capsys, monkeypatch):
    import decoders.models.family as family

    monkeypatch.setattr(family, "load_family", lambda *a, **k: pytest.fail("the model was loaded first"))
    os_fifo = tmp_path / "pipe"
    import os

    os.mkfifo(os_fifo)
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "big.pt").write_bytes(b"")
    os.truncate(tmp_path / "big.pt", 65 << 20)
    for source, message in ((tmp_path / "missing.pt", "does not exist; give a file of token ids"),
                            (os_fifo, "is not a regular file (a device or a pipe)"),
                            (tmp_path / "empty.json", "is empty; give FR-Spec's freq_"),
                            (tmp_path / "corpus", "holds no tokens to count (no tokens.u16)"),
                            (tmp_path / "big.pt", "is 65 MB, more than a ranking of token ids needs"),
                            (tmp_path / ("x" * 300), "cannot be read (File name too long)")):
        argv = ["run", "--head", str(tmp_path), "--head-vocab", "8", "--head-vocab-from", str(source), "--prompt", "x"]
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_head_vocab_with_a_draft_that_is_no_head_is_refused_not_ignored(tmp_path, capsys, monkeypatch):
    import decoders.models.family as family

    monkeypatch.setattr(family, "load_family", lambda *a, **k: pytest.fail("the model was loaded first"))
    for argv, draft in ((["--self-draft", "int4"], "the int4 self-draft"),
                        (["--self-draft-layer", "10"], "the first 10 layers"),
                        (["--helper", "org/helper"], "the helper org/helper"),
                        (["--main", str(tmp_path)], "no draft")):
        assert cli_main(["run", *argv, "--head-vocab", "64", "--prompt", "x"]) == 2
        err = capsys.readouterr().err
        assert f"this run drafts with {draft}; add --self-draft head" in err and err.count("\n") == 1, err
    args = build_parser().parse_args(["run", "--head-vocab", "64", "--prompt", "x"])  # bundled: fastest may pick it
    assert head_of(family_spec(ModelFlags.of(args)).draft).vocab == 64


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    from tests.support.tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("heads") / "model")


@pytest.mark.parametrize("fmt", ["medusa", "eagle1"])
def test_a_head_drafts_from_the_command_line_in_every_format(tmp_path, tiny_folder, capsys, fmt):
    """The warm-up after loading ran the draft alone: Medusa heads, which read the target's feature
    of a verified position, refused it ("need the target's feature ... first") and the run failed."""
    import json

    from tests.support.heads import write_head

    write_head(tmp_path / "head", fmt)
    code = cli_main(["run", "--main", str(tiny_folder), "--self-draft", "head", "--head", str(tmp_path / "head"),
                     "--method", "spec", "--max-new-tokens", "6", "--threads", "1", "--json", "-",
                     "--prompt", "w1 w2 w3 w1 w2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["family"]["draft"]["kind"] == "head" and data["summary"]["identical"] is True
