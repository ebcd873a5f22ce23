"""Heads with odd config fields and tensors: each case one line naming the field and how to fix
it, never a crash report."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file, save_file

from decoders.core.errors import DecodeError

pytestmark = pytest.mark.usefixtures("isolated")


def _odd_head(isolated, fmt, config=None, tensors=None):
    from tests.support.heads import write_head

    folder = isolated / "head"
    folder.mkdir()
    write_head(folder, fmt)
    if config is not None:
        data = json.loads((folder / "config.json").read_text())
        config(data)
        (folder / "config.json").write_text(json.dumps(data))
    if tensors is not None:
        weights = load_file(str(folder / "model.safetensors"))
        tensors(weights)
        save_file(weights, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("fmt", ["eagle1", "eagle3"])
@pytest.mark.parametrize("change,message", [
    (lambda c: c.__setitem__("rope_theta", "big"), "config.json: rope_theta must be a number, got str; download"),
    (lambda c: c.__setitem__("rms_norm_eps", "nan"), "config.json: rms_norm_eps must be a number, got str"),
    (lambda c: c.__setitem__("rms_norm_eps", float("nan")), "config.json cannot be read (it is not JSON"),
    (lambda c: c.__setitem__("rms_norm_eps", 1.5), "expected 0 < rms_norm_eps < 1"),
    (lambda c: c.__setitem__("num_attention_heads", True), "num_attention_heads must be an integer, got bool"),
    (lambda c: c.__setitem__("rms_norm_eps", -1), "expected 0 < rms_norm_eps < 1"),
    (lambda c: c.__setitem__("rope_theta", 0), "a positive finite rope_theta"),
    (lambda c: c.__setitem__("num_attention_heads", 0), "num_attention_heads 0"),
])
def test_a_head_config_field_of_a_wrong_value_is_one_line(isolated, fmt, change, message):
    """rope_theta "big" was float()'s ValueError and num_attention_heads 0 a ZeroDivisionError (crash
    reports); rms_norm_eps NaN or negative loaded, a head that drafts nothing but NaN."""
    from decoders.backends.heads.load import load_head
    from tests.support.engine import peaked_model

    folder = _odd_head(isolated, "eagle" if fmt == "eagle1" else fmt, config=change)
    with pytest.raises(DecodeError, match=message.replace("(", r"\(")):
        load_head(folder, peaked_model(layers=5))


@pytest.mark.parametrize("config,tensors,message", [
    (lambda c: c.__setitem__("eagle_config", {"eagle_aux_hidden_state_layer_ids": "1,2,3"}), None,
     "eagle_config.eagle_aux_hidden_state_layer_ids must be a list or null, got str"),
    (lambda c: c.__setitem__("eagle_config", {"eagle_aux_hidden_state_layer_ids": [1, "2"]}), None,
     r"eagle_config.eagle_aux_hidden_state_layer_ids\[1\] must be an integer, got str"),
    (lambda c: c.__setitem__("eagle_config", [1]), None, "eagle_config must be an object, got array"),
    (None, lambda t: t.__setitem__("d2t", t["d2t"][:5]), r"d2t has shape \(5,\), not \(40,\)"),
])
def test_an_eagle3_head_with_odd_aux_layers_or_d2t_is_one_line(isolated, config, tensors, message):
    """A string of layer ids was int()'s ValueError, a list eagle_config an AttributeError, a d2t
    shorter than the lm_head a RuntimeError of torch's broadcasting."""
    from decoders.backends.heads.load import load_head
    from tests.support.engine import peaked_model

    folder = _odd_head(isolated, "eagle3", config=config, tensors=tensors)
    with pytest.raises(DecodeError, match=message):
        load_head(folder, peaked_model(layers=5))


def test_a_head_config_nested_too_deeply_is_one_line(isolated):
    """json's RecursionError was a crash report."""
    from decoders.backends.heads.formats import read_head_files

    folder = _odd_head(isolated, "eagle3")
    (folder / "config.json").write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(DecodeError, match=r"config.json cannot be read \(it is not JSON: maximum recursion depth"):
        read_head_files(folder)
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DecodeError, match="config.json is not a JSON object"):
        read_head_files(folder)
