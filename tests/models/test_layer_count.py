"""An early-exit layer beyond the model is refused before the model loads (`--self-draft-layer 40`
was refused after 13.8 s of loading): the depth is read from a GGUF header or a config.json, and
where it cannot be read the load checks it as before."""

from __future__ import annotations

import json

import pytest

from decoders.core.errors import DecodeError
from decoders.models.drafts import EarlyExit
from decoders.models.family import FamilySpec
from decoders.models.layer_count import check_draft_layer, config_layers, gguf_block_count, known_layers
from tests.cli.conftest import error_line
from tests.support.tiny_gguf import write_tiny_gguf


@pytest.fixture
def no_load(monkeypatch):
    """Any model load fails the test: the refusal must come first."""
    import decoders.models.torch_family as torch_family
    import tui_decode.cli.main as cli

    def loaded(*args, **kwargs):
        raise AssertionError("a model was loaded before the layer was checked")

    monkeypatch.setattr(cli, "load_with_progress", loaded)
    monkeypatch.setattr(torch_family, "load_source", loaded)


def folder_with_config(tmp_path, config: dict):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_the_gguf_header_gives_the_depth(tmp_path):
    assert gguf_block_count(write_tiny_gguf(tmp_path / "tiny.gguf", layers=3)) == 3


def test_the_depth_is_found_after_arrays_of_strings_and_numbers(tmp_path):
    """The walk skips every value type before the block count: strings, arrays of strings, of floats."""
    import gguf

    path = tmp_path / "late.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_token_list(["a", "bb", "ccc"] * 1000)
    writer.add_token_scores([0.5] * 3000)
    writer.add_name("late")
    writer.add_bool("x.flag", True)
    writer.add_block_count(7)
    writer.add_tensor("token_embd.weight", __import__("numpy").zeros((4, 2), "float32"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert gguf_block_count(path) == 7


@pytest.mark.parametrize("damage", ["cut", "not gguf", "version 1"])
def test_a_header_that_does_not_parse_gives_no_depth(tmp_path, damage):
    path = write_tiny_gguf(tmp_path / "tiny.gguf", layers=3)
    data = path.read_bytes()
    data = {"cut": data[:60], "not gguf": b"GGML" + data[4:], "version 1": data[:4] + (1).to_bytes(4, "little")
            + data[8:]}[damage]
    path.write_bytes(data)
    assert gguf_block_count(path) is None


def test_config_json_gives_the_depth(tmp_path):
    assert config_layers(folder_with_config(tmp_path, {"num_hidden_layers": 5}) / "config.json") == 5
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps({"text_config": {"num_hidden_layers": 9}}))
    assert config_layers(nested) == 9
    for bad in ([1], {"num_hidden_layers": "5"}, {"num_hidden_layers": True}, {}):
        nested.write_text(json.dumps(bad))
        assert config_layers(nested) is None
    nested.write_text("{not json")
    assert config_layers(nested) is None


def test_run_refuses_a_layer_beyond_a_gguf_model_before_loading(capsys, tmp_path, no_load):
    path = write_tiny_gguf(tmp_path / "tiny.gguf", layers=3)
    err = error_line(capsys, ["run", "--main", str(path), "--self-draft-layer", "3", "--method", "spec",
                              "--prompt", "hi", "--threads", "1"])
    assert err == ("tui-decode: error: --self-draft-layer 3 is out of range: the main model has 3 layers, so give "
                   "a layer from 1 to 2.\n")


def test_run_refuses_a_layer_beyond_a_folder_model_before_loading(capsys, tmp_path, no_load):
    folder = folder_with_config(tmp_path, {"num_hidden_layers": 5})
    err = error_line(capsys, ["run", "--main", str(folder), "--self-draft-layer", "40", "--prompt", "hi"])
    assert "--self-draft-layer 40 is out of range: the main model has 5 layers" in err


def test_the_default_family_refuses_layer_40_before_loading(capsys, no_load):
    if known_layers("bundled") is None:
        pytest.skip("the bundled model is not installed")
    err = error_line(capsys, ["run", "--self-draft-layer", "40", "--method", "spec", "--prompt", "hi"])
    assert "--self-draft-layer 40 is out of range: the main model has 30 layers, so give a layer from 1 to 29" in err


def test_a_layer_within_the_model_goes_on_to_the_load(tmp_path):
    folder = folder_with_config(tmp_path, {"num_hidden_layers": 5})
    check_draft_layer(FamilySpec(name="f", main=str(folder), draft=EarlyExit(layer=4)), "--self-draft-layer")


def test_a_depth_not_known_before_loading_leaves_the_check_to_the_load(tmp_path):
    folder = folder_with_config(tmp_path, {"model_type": "llama"})  # no num_hidden_layers
    check_draft_layer(FamilySpec(name="f", main=str(folder), draft=EarlyExit(layer=400)))
    assert known_layers("some-org/not-in-the-cache") is None


def test_load_family_refuses_a_family_layer_before_loading(tmp_path, no_load):
    """A families.toml layer (no flag) is refused by the load itself before anything is read."""
    from decoders.models.family import load_family

    folder = folder_with_config(tmp_path, {"num_hidden_layers": 5})
    with pytest.raises(DecodeError, match=r"^Self-draft layer 7 is out of range: the main model has 5 layers, so "
                                          r"choose a layer from 1 to 4\.$"):
        load_family(FamilySpec(name="f", main=str(folder), draft=EarlyExit(layer=7), device="cpu",
                               dtype="float32"))
