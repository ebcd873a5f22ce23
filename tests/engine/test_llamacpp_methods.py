"""Every method on the llama.cpp backend (the bundled Q4_1 file run by llama.cpp as stored, with the
same file as its GGUF helper): greedy output identical to that backend's own autoregressive run,
sampling reproducible by seed; and the bad input of issue 25 as one line, exit 2."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("llama_cpp")

from decoders.core.errors import DecodeError  # noqa: E402
from decoders.core.params import DecodeParams  # noqa: E402
from decoders.engine import Engine  # noqa: E402
from decoders.models.drafts import HelperModel, Int4
from decoders.models.family import FamilySpec, load_family  # noqa: E402
from tui_decode.cli.main import main as cli_main  # noqa: E402

PROMPT = "List the planets of the solar system, one per line, with one fact about each."


@pytest.fixture(scope="module")
def engine():
    from tests.support.threads import torch_threads

    with torch_threads(1):
        family = load_family(FamilySpec(name="lc", main="bundled", draft=HelperModel(source="bundled"), backend="llamacpp"))
        yield Engine(family)


GREEDY = [
    DecodeParams(method="ar"),
    DecodeParams(method="spec", gamma=4, draft_policy="fixed"),
    DecodeParams(method="spec", gamma=4),
    DecodeParams(method="spec", tree_width=2, tree_depth=3),
    DecodeParams(method="pld", num_pred=5, draft_policy="fixed"),
    DecodeParams(method="pld", tree_width=2),
    DecodeParams(method="jacobi", block=4),
    DecodeParams(method="lookahead"),
]


@pytest.mark.model
@pytest.mark.parametrize("params", GREEDY, ids=lambda p: f"{p.method}-{p.tree_width}-{p.draft_policy}")
def test_every_method_emits_the_llama_cpp_baseline(engine, params):
    result = engine.run(PROMPT, params.replace(max_new_tokens=40))
    assert result.method.ids == result.baseline.ids, result.summary.first_divergence
    assert len(result.method.ids) == 40
    assert result.family.backend == "llamacpp" and result.family.dtype == "Q4_1 (llama.cpp)"


@pytest.mark.model
def test_the_llama_cpp_family_has_what_a_gguf_helper_needs(engine):
    family = engine.family
    assert family.backend == "llamacpp" and family.main_model is None
    assert family.helper.model is family.main.model  # the same file is loaded once
    assert engine.has_helper and engine.draft_layer is None and engine.draft_layers == 0
    assert family.context_length == 8192
    assert family.decode(family.encode_prompt("Hello", chat_template=False)) == "Hello"
    with pytest.raises(DecodeError, match="needs the torch backend|does not expose"):
        engine.build_draft(Int4())


@pytest.mark.model
def test_sampling_on_llama_cpp_is_reproducible_by_seed(engine):
    params = DecodeParams(method="spec", gamma=3, mode="sampling", seed=7, max_new_tokens=24, draft_policy="fixed")
    first, second = engine.run(PROMPT, params), engine.run(PROMPT, params)
    assert first.method.ids == second.method.ids
    assert engine.run(PROMPT, params.replace(seed=8)).method.ids != first.method.ids


@pytest.mark.parametrize("argv, message", [
    (["--backend", "llamacpp", "--main", "HuggingFaceTB/SmolLM2-135M-Instruct"], "runs GGUF files, and the main model"),
    (["--backend", "llamacpp", "--self-draft", "int4"], "int4 self-draft is packed from the torch model"),
    (["--backend", "llamacpp", "--self-draft-layer", "10"], "early-exit draft needs the torch backend"),
    (["--backend", "llamacpp", "--dtype", "float16"], "as the GGUF file stores them"),
    (["--backend", "llamacpp", "--dtype", "fastest", "--method", "ar"], "so there is nothing to choose"),  # was ignored
    (["--backend", "llamacpp", "--device", "cuda"], "runs on the CPU"),
    (["--backend", "llamacpp", "--device-map", "auto"], "cannot take one"),
])
def test_what_llama_cpp_cannot_run_is_one_line_before_loading(capsys, argv, message):
    assert cli_main(["run", *argv, "--prompt", "x", "--max-new-tokens", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "--backend torch" in err and len(err.splitlines()) == 1, err


def test_a_model_folder_with_the_llama_cpp_backend_is_refused(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{}")
    assert cli_main(["run", "--backend", "llamacpp", "--main", str(tmp_path), "--prompt", "x"]) == 2
    assert "is a model folder; give a .gguf file" in capsys.readouterr().err


def test_a_missing_llama_cpp_python_says_how_to_install_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp raises ModuleNotFoundError
    assert cli_main(["run", "--backend", "llamacpp", "--method", "ar", "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert "needs llama-cpp-python, which is not installed" in err and "pip install llama-cpp-python" in err


def test_a_too_old_llama_cpp_python_is_named(capsys, monkeypatch):
    import llama_cpp

    monkeypatch.setattr(llama_cpp, "__version__", "0.2.90")
    assert cli_main(["run", "--backend", "llamacpp", "--method", "ar", "--prompt", "x"]) == 2
    assert "llama-cpp-python 0.2.90 is too old" in capsys.readouterr().err


def test_an_architecture_llama_cpp_does_not_know_is_one_line(capsys, tmp_path):
    from gguf import GGUFWriter

    path = tmp_path / "odd.gguf"
    writer = GGUFWriter(str(path), "nosucharch")
    writer.add_block_count(1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert cli_main(["run", "--backend", "llamacpp", "--main", str(path), "--method", "ar", "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert "llama.cpp cannot load" in err and "odd.gguf" in err and "Traceback" not in err


@pytest.mark.model
def test_speculative_without_a_helper_on_llama_cpp_names_the_gguf_helper(capsys):
    assert cli_main(["run", "--backend", "llamacpp", "--method", "spec", "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert "--helper FILE.gguf" in err and "int4" not in err, err


@pytest.mark.model
def test_a_context_longer_than_the_model_is_one_line(capsys):
    assert cli_main(["run", "--backend", "llamacpp", "--method", "ar", "--prompt", "x",
                     "--max-new-tokens", "9000"]) == 2
    err = capsys.readouterr().err
    assert "context" in err and len(err.strip().splitlines()) == 1, err
