"""Contracts the type checker can see: a field a class declares is read as an attribute, never
probed by name with ``getattr``/``hasattr`` (a rename would return the default silently), and a
capability some backends have is a Protocol of `decoders.backends.capabilities`.

Every ``getattr(x, "name")`` / ``hasattr(x, "name")`` left in ``decoders/`` and ``tui_decode/`` is
listed below with why it must stay dynamic; a new one fails here until it is replaced by an
attribute read or a Protocol, or listed with its reason. (A ``getattr`` with a computed name, as a
loop over a struct's fields, is not a probe and is not counted.)
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_TRANSFORMERS = "a transformers config, model or tokenizer: the attribute depends on the model type and version"
_DEVICE = "a torch.device or a device string"
_PARTIAL = "__del__ of an object whose __init__ may have failed before setting it"

#: (file, attribute) -> why the probe stays.
ALLOWED: dict[tuple[str, str], str] = {
    **{("decoders/backends/heads/load.py", name): _TRANSFORMERS
       for name in ("get_text_config", "num_key_value_heads", "rms_norm_eps", "rope_theta")},
    **{("decoders/backends/heads/training.py", name): _TRANSFORMERS for name in ("get_text_config", "head_dim")},
    **{("decoders/backends/batched.py", name): _TRANSFORMERS
       for name in ("_attn_implementation", "get_text_config", "head_dim", "layer_types", "max_position_embeddings",
                    "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "sliding_window")},
    **{("decoders/backends/hf.py", name): _TRANSFORMERS
       for name in ("_attn_implementation", "_hf_hook", "base_model_prefix", "get_input_embeddings", "get_text_config",
                    "hf_device_map", "is_sliding", "layer_types", "layers", "max_position_embeddings", "model_type",
                    "num_hidden_layers", "sliding_window", "use_sliding_window", "weight")},
    **{("decoders/backends/llama_support.py", name): _TRANSFORMERS
       for name in ("attention_bias", "config", "embed_tokens", "get_text_config", "hf_device_map", "hidden_act",
                    "k_norm", "layer_types", "layers", "mlp_bias", "model", "model_type", "q_norm",
                    "rope_parameters", "rope_scaling", "sliding_window", "use_sliding_window")},
    **{("decoders/backends/llama_weights.py", name): _TRANSFORMERS
       for name in ("attention_scaling", "head_dim", "num_key_value_heads")},
    **{("decoders/backends/quantized.py", name): _TRANSFORMERS
       for name in ("head_dim", "max_position_embeddings", "num_key_value_heads", "shared_head")},
    **{("decoders/models/family.py", name): _TRANSFORMERS
       for name in ("added_tokens_decoder", "all_special_ids", "all_special_tokens", "chat_template", "eos_token_id",
                    "generation_config", "get_text_config", "max_position_embeddings", "model_max_length", "special")},
    ("decoders/models/torch_family.py", "hf_device_map"): _TRANSFORMERS,
    **{("decoders/models/gguf_cache.py", name): _TRANSFORMERS
       for name in ("quantization_config", "quantization_method")},
    **{("decoders/models/token_display.py", name): _TRANSFORMERS for name in ("backend_tokenizer", "decoder")},
    ("tui_decode/cli/families.py", "model_type"): _TRANSFORMERS,
    **{("decoders/bench/reference.py", name): _TRANSFORMERS
       for name in ("base_model_prefix", "generate", "num_hidden_layers", "pad_token_id")},
    ("decoders/bench/reference.py", "main"): "transformers_model takes a Family or a Backend (only a Family has main)",
    ("decoders/backends/host.py", "type"): _DEVICE,
    ("decoders/backends/runner.py", "type"): _DEVICE,
    ("decoders/models/kept_choice.py", "type"): _DEVICE,
    ("decoders/models/backend_choice.py", "mps"): "torch.backends.mps is missing from some torch builds",
    **{("decoders/backends/llamacpp.py", name): _PARTIAL for name in ("_batch", "ctx", "lib")},
    ("decoders/backends/llamacpp_model.py", "model"): _PARTIAL,
    **{("decoders/backends/llamacpp_model.py", name): "a function of llama-cpp-python that older versions lack"
       for name in ("llama_memory_seq_rm", "llama_model_n_swa")},
    ("decoders/bench/files.py", "strerror"): "the exception caught may be an OSError (with strerror) or not",
    ("tui_decode/cli/parser.py", "command"): "the parser parses any subcommand's arguments; not all set `command`",
    **{("tui_decode/screens/" + name, "runs_folder"): "the first screen is the main screen in the app and any "
       "Screen in a test's app" for name in ("compare_screen.py", "history_screen.py")},
    **{("tui_decode/workers/draw_gate.py", name): "Textual's private writer thread, absent in headless tests"
       for name in ("_driver", "_queue", "_writer_thread")},
    ("decoders/models/draft_choice.py", "chat_template"): _TRANSFORMERS,
}


def probes() -> dict[tuple[str, str], list[int]]:
    """Every getattr/hasattr with a literal attribute name in the packages: (file, name) -> lines."""
    found: dict[tuple[str, str], list[int]] = {}
    for package in ("decoders", "tui_decode"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                        and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                    key = (path.relative_to(ROOT).as_posix(), node.args[1].value)
                    found.setdefault(key, []).append(node.lineno)
    return found


def test_every_getattr_by_name_is_listed_with_why():
    found = probes()
    new = [f"{file}:{lines[0]} {name!r}" for (file, name), lines in sorted(found.items()) if (file, name) not in ALLOWED]
    assert not new, ("getattr/hasattr by name: read the declared attribute (or check a Protocol of "
                     "decoders.backends.capabilities), or list it in ALLOWED with why it must stay dynamic:\n"
                     + "\n".join(new))
    gone = sorted(key for key in ALLOWED if key not in found)
    assert not gone, f"listed in ALLOWED but no longer in the code (take them off): {gone}"


def _declared() -> dict[str, set[str]]:
    """The fields and methods the engine's main types declare, by type."""
    from decoders.backends import capabilities
    from decoders.backends.hf import Backend
    from decoders.models.family import Family, FamilySpec

    declared = {cls.__name__: {f.name for f in dataclasses.fields(cls)} | set(vars(cls))
                for cls in (Family, FamilySpec)}
    protocols = [Backend] + [obj for obj in vars(capabilities).values()
                             if isinstance(obj, type) and getattr(obj, "_is_protocol", False)
                             and obj.__module__ == capabilities.__name__]
    for proto in protocols:
        declared[proto.__name__] = set(vars(proto).get("__annotations__", {})) | {
            name for name in vars(proto) if not name.startswith("_")}
    return {name: {field for field in fields if not field.startswith("__")} for name, fields in declared.items()}


def test_no_probe_reads_a_field_the_engine_types_declare():
    """A Family, FamilySpec, Backend or capability field probed by name is a rename waiting to
    return None: only the listed objects of another type (a transformers config's ``model_type``)
    may be probed."""
    declared = _declared()
    field_names = set().union(*declared.values())
    # names shared by a declared type and an object of another type probed for them
    other_types = {("decoders/bench/reference.py", "main"), ("decoders/models/family.py", "chat_template")}
    suspicious = sorted(f"{file} {name!r} (declared by {', '.join(sorted(t for t, f in declared.items() if name in f))})"
                        for (file, name) in probes()
                        if name in field_names and (file, name) not in other_types)
    assert not suspicious, "read these declared fields as attributes:\n" + "\n".join(suspicious)
