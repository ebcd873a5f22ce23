"""The int4 self-draft: a weight-only int4 copy of the main model drafts for it. The verifier keeps
the output exactly the target's; the draft only has to agree with it often."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from decoders.backends.quantized import QuantizedLlamaBackend, quantize_int4, unsupported_reason
from decoders.core.errors import DecodeError
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.models.backend_choice import quantized_draft
from decoders.models.drafts import EarlyExit, HelperModel, Int4, kind_of, legacy_draft
from decoders.models.family import FamilySpec, load_family
from tests.support.quantized import PROMPT, peaked_model
from tests.support.tiny import save_tiny_model, tiny_model
from tui_decode.cli.main import main as cli_main


@pytest.fixture(scope="module")
def tiny_int4(tmp_path_factory):
    folder = save_tiny_model(tmp_path_factory.mktemp("int4") / "main", model=peaked_model())
    return load_family(FamilySpec(name="t", main=str(folder), draft=Int4(), device="cpu"))


def test_quantize_int4_round_trips_within_half_a_step():
    w = torch.randn(48, 64)
    q, scales_zeros = quantize_int4(w, 32)
    scale, zero = scales_zeros[..., 0].t(), scales_zeros[..., 1].t()  # [out, groups]
    back = (q.float() - 8).view(48, 2, 32) * scale[..., None] + zero[..., None]
    assert q.min() >= 0 and q.max() <= 15
    assert ((back.view(48, 64) - w).abs() <= scale.repeat_interleave(32, 1) / 2 + 1e-6).all()


def test_the_int4_draft_is_its_own_backend_beside_the_main_model(tiny_int4):
    family = tiny_int4
    assert isinstance(family.helper, QuantizedLlamaBackend)
    assert family.self_draft == "int4" and family.helper_source == "int4 self-draft"
    assert family.helper.weights.embed.data_ptr() == family.main.weights.embed.data_ptr()  # shared
    assert family.helper.weight_bytes < family.main.weight_bytes
    logits = family.helper.forward(torch.tensor([5, 6, 7]), keep=2)
    assert logits.shape == (2, 64) and logits.dtype == torch.float32
    assert family.main.cached_length == 0  # a cache of its own
    family.helper.reset()
    engine = Engine(family)
    assert engine.draft_layer is None  # not an early exit


def test_greedy_speculative_with_the_int4_draft_equals_autoregressive(tiny_int4):
    engine = Engine(tiny_int4)
    for gamma in (1, 3, 6):
        result = engine.run(PROMPT, DecodeParams(method="spec", gamma=gamma, max_new_tokens=40))
        assert result.method.ids == result.baseline.ids and result.summary.identical
        assert result.summary.drafted > 0 and result.summary.accepted > 0


def test_sampling_with_the_int4_draft_is_reproducible_by_seed(tiny_int4):
    engine = Engine(tiny_int4)
    params = DecodeParams(method="spec", mode="sampling", temperature=0.8, seed=5, max_new_tokens=24)
    assert engine.run(PROMPT, params).method.ids == engine.run(PROMPT, params).method.ids


def test_a_shape_the_kernel_cannot_take_is_named(tmp_path):
    model = peaked_model(intermediate_size=40)  # down_proj reads 40 inputs: not whole groups of 32
    reason = unsupported_reason(model)
    assert "down_proj reads 40 inputs" in reason and "group size 32" in reason
    folder = save_tiny_model(tmp_path / "odd", model=model)
    with pytest.raises(DecodeError) as err:
        load_family(FamilySpec(name="t", main=str(folder), draft=Int4(), device="cpu"))
    message = str(err.value)
    assert "Cannot build an int4 self-draft" in message and "down_proj" in message and "\n" not in message


def test_a_device_without_the_kernel_is_named():
    reason = unsupported_reason(tiny_model(), device=torch.device("mps"))
    assert "no packed int4 matmul kernel for device 'mps'" in reason


@pytest.mark.parametrize("changes,message", [
    (dict(helper="HuggingFaceTB/SmolLM2-135M-Instruct"), "sets `self_draft` and `helper`; keep one."),
    (dict(self_draft_layer=1), "sets `self_draft` and `self_draft_layer`; keep one."),
    (dict(self_draft="int3"), "Unknown draft kind 'int3'"),
])
def test_conflicting_or_unknown_self_drafts_are_refused(changes, message):
    """A spec holds one `Draft`, so two drafts at once cannot be asked for; the old field names
    (still read from files) that ask for two, or for a kind not declared, are refused in one line."""
    with pytest.raises((ValueError, DecodeError)) as err:
        legacy_draft(**({"self_draft": "int4"} | changes))
    assert message in str(err.value)


@pytest.mark.parametrize("argv,message", [
    (["run", "--self-draft", "int4", "--helper", "x/y"], "give either --self-draft int4 or --helper SRC, not both"),
    (["run", "--self-draft", "int4", "--self-draft-layer", "3"], "give either --self-draft int4 or --self-draft-layer L"),
    (["run", "--self-draft", "int2"], "unknown --self-draft kind 'int2'; choose one of int4"),
])
def test_cli_bad_self_draft_is_one_line_and_exit_2(capsys, argv, message):
    code = cli_main(argv + ["--prompt", "hi"])
    out, err = capsys.readouterr()
    assert code == 2 and message in err and err.count("\n") == 1 and out == ""


def test_families_toml_accepts_self_draft(tmp_path, monkeypatch, capsys):
    from decoders.models.families import user_families

    path = tmp_path / "families.toml"
    path.write_text('[families.q]\nmain = "bundled"\nself_draft = "int4"\n')
    assert user_families(path)["q"].self_draft == "int4"
    path.write_text('[families.q]\nmain = "bundled"\nself_draft = "int9"\n')
    with pytest.raises(DecodeError, match="self_draft 'int9' is not one of int4"):
        user_families(path)
    path.write_text('[families.q]\nmain = "bundled"\nself_draft = "int4"\nself_draft_layer = 3\n')
    with pytest.raises(DecodeError, match="keep one"):
        user_families(path)
    path.write_text('[families.q]\nmain = "bundled"\nself_draft = "int4"\n')
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    assert cli_main(["families"]) == 0
    assert "int4 self-draft" in capsys.readouterr().out


def test_families_piped_keeps_every_id_whole(capsys, monkeypatch, tmp_path):
    """Piped output (not a terminal, 80 columns by default) is as wide as the table needs."""
    from decoders.models.families import BUILTIN_FAMILIES

    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path))
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli_main(["families"]) == 0
    out = capsys.readouterr().out
    for spec in BUILTIN_FAMILIES.values():
        assert spec.main in out and (spec.helper or "") in out
    assert "…" not in out


# -- the bundled model ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2_int4(smollm2):
    draft = quantized_draft(smollm2.main, smollm2.main_model, "int4")
    return Engine(replace(smollm2, helper=draft, helper_source="int4 self-draft", draft=Int4()))


def test_bundled_int4_draft_is_accepted_almost_always_and_the_output_is_the_targets(smollm2_int4):
    """Measured: acceptance 0.97-0.99 over these prompts at gamma 4 (the layers' int4 groups are
    the GGUF file's own Q4_1 blocks; the LM head is the target's)."""
    drafted = accepted = 0
    for prompt in ("Explain why the sky is blue in two sentences.", "Write a haiku about autumn leaves."):
        # a fixed draft length: the adaptive one reads the machine's timings, so under load its drafts differ
        result = smollm2_int4.run(prompt, DecodeParams(method="spec", gamma=4, max_new_tokens=48, draft_policy="fixed"))
        assert result.method.ids == result.baseline.ids and result.summary.identical
        drafted += result.summary.drafted
        accepted += result.summary.accepted
    assert accepted / drafted >= 0.9


# -- switching drafts on a loaded engine, and what the families table offers ------------------------

def test_an_engine_switches_between_its_helper_model_int4_and_back(tmp_path):
    main = peaked_model()
    folders = {name: save_tiny_model(tmp_path / name, model=model)
               for name, model in (("main", main), ("helper", peaked_model(seed=1)))}
    family = load_family(FamilySpec(name="t", main=str(folders["main"]), draft=HelperModel(source=str(folders["helper"])),
                                    device="cpu"))
    engine = Engine(family, pairing="sequential")  # its cached baseline must survive the draft switches
    own = family.helper
    assert engine.helper_model_source == str(folders["helper"]) and not engine.has_draft(Int4())
    engine.set_draft(Int4())
    assert isinstance(engine.family.helper, QuantizedLlamaBackend) and engine.family.main is family.main
    assert engine.run(PROMPT, DecodeParams(method="spec", max_new_tokens=12)).family.helper == "int4 self-draft"
    draft = engine.family.helper
    engine.set_draft(None)  # the family's own helper model
    assert engine.family.helper is own and engine.family.helper_source == str(folders["helper"])
    assert engine.family.self_draft is None
    engine.set_draft(Int4())
    assert engine.family.helper is draft  # built once
    assert engine.baselines_measured == 1
    with pytest.raises(DecodeError, match="Unknown draft kind 'int8'; choose one of helper, early-exit, int4"):
        kind_of("int8")


def test_draft_options_step_through_helper_layers_and_int4():
    from tui_decode.state.settings import DraftOptions, Settings

    exits = DraftOptions(layers=3, kinds=("int4",))
    assert exits.step(Settings(draft=None), 1).draft_layer == 2  # the default layer first
    at_top = exits.step(Settings(draft=EarlyExit(layer=2)), 1)
    assert at_top.draft == Int4() and at_top.self_draft == "int4" and at_top.draft_layer is None
    assert exits.step(at_top, 1) == at_top  # the last choice
    assert exits.step(at_top, -1) == Settings(draft=EarlyExit(layer=2))
    helper = DraftOptions(helper="x/small", kinds=("int4",))
    assert helper.step(Settings(), 1) == Settings(draft=Int4())
    assert helper.step(Settings(draft=Int4()), -1) == Settings()
    assert DraftOptions(layers=30).step(Settings(draft=EarlyExit(layer=29)), 1) == \
        Settings(draft=EarlyExit(layer=29))  # no int4 offered


def test_the_families_table_offers_int4_where_it_can_draft(tmp_path, monkeypatch, capsys):
    odd = save_tiny_model(tmp_path / "odd", model=peaked_model(intermediate_size=40))
    (tmp_path / "families.toml").write_text(
        f'[families.q]\nmain = "bundled"\nself_draft = "int4"\n'
        f'[families.odd]\nmain = "{odd}"\n'
        f'[families.exit]\nmain = "bundled"\nself_draft_layer = 20\n')
    monkeypatch.setenv("TUI_DECODE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "300")
    capsys.readouterr()
    assert cli_main(["families"]) == 0
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
            for line in capsys.readouterr().out.splitlines() if line.startswith("│")}
    shipped = "trained head (--self-draft head)"  # the bundled model's head ships in the package
    # the bundled family drafts with whichever of int4 and its head is faster, measured at load
    assert rows["smollm2-135m"][1:3] == ["int4 or the trained head, whichever is faster here (measured at load)",
                                         f"early exit (--self-draft-layer L); int4 (--self-draft int4); {shipped}"]
    assert rows["smollm2-360m"][1:3] == ["HuggingFaceTB/SmolLM2-135M-Instruct",
                                         "early exit (--self-draft-layer L); int4 (--self-draft int4); "
                                         "a trained head (--head FOLDER)"]
    assert rows["q"][1:3] == ["int4 self-draft", f"early exit (--self-draft-layer L); {shipped}"]
    assert rows["exit"][1:3] == ["early exit @ layer 20", f"int4 (--self-draft int4); {shipped}"]
    assert rows["odd"][2].startswith("early exit (--self-draft-layer L); not int4: down_proj reads 40 inputs")
