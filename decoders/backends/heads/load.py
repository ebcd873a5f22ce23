"""Build a head from its files for a target, or save one (the EAGLE-3 layout, so others can read it)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import torch

from decoders.backends.heads.eagle import EagleHead, HeadConfig
from decoders.backends.heads.formats import (
    WEIGHTS_FILE,
    WEIGHTS_ID_KEY,
    TargetShape,
    detect_format,
    need,
    read_head_files,
)
from decoders.backends.heads.medusa import MedusaHeads
from decoders.core.errors import DecodeError
from decoders.records.stored import EagleConfig, HeadConfigFile, TrainingReport, or_default

ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")


def default_aux_layers(n_layers: int) -> tuple[int, int, int]:
    """EAGLE-3's default: the inputs of layers 2, L // 2 and L - 3 (low, middle, high)."""
    return (2, n_layers // 2, n_layers - 3)


def target_shape(model) -> TargetShape:
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(text.num_attention_heads)
    return TargetShape(hidden=int(text.hidden_size), vocab=int(model.get_output_embeddings().weight.shape[0]),
                       n_layers=int(text.num_hidden_layers), heads=heads,
                       kv_heads=int(getattr(text, "num_key_value_heads", None) or heads),
                       rope_theta=float(getattr(text, "rope_theta", None) or 10000.0),
                       eps=float(getattr(text, "rms_norm_eps", 1e-5)))


def load_head(folder: str | Path, model) -> EagleHead | MedusaHeads:
    """The head in ``folder`` for the transformers ``model`` it drafts for (its LM head and sizes)."""
    config, tensors = read_head_files(folder)
    target = target_shape(model)
    kind = or_default(config.tui_decode_format, None) or detect_format(tensors)
    vocab = or_default(config.vocab_size, target.vocab)
    if vocab != target.vocab:
        raise DecodeError(f"Head {folder} has vocab_size {vocab} but the target's vocabulary is {target.vocab}; "
                          "it was trained for another model.")
    if kind == "medusa":
        return _medusa(config, tensors, target)
    return _eagle(kind, config, tensors, target, model, str(folder))


def _eagle(kind: str, config: HeadConfigFile, tensors: dict, target: TargetShape, model, folder: str) -> EagleHead:
    eagle3 = kind == "eagle3"
    prefix = "midlayer." if eagle3 else "layers.0."
    hidden = or_default(config.hidden_size, target.hidden)
    if not eagle3 and hidden != target.hidden:
        raise DecodeError(f"Head {folder} has hidden_size {hidden} but the target's is {target.hidden}; an "
                          "EAGLE-1/2 head reads the target's hidden state as it is.")
    heads = or_default(config.num_attention_heads, target.heads)
    kv_heads = or_default(config.num_key_value_heads, heads)
    if min(heads, kv_heads, hidden) < 1:
        raise DecodeError(f"Head {folder}'s config has num_attention_heads {heads}, num_key_value_heads {kv_heads}, "
                          f"hidden_size {hidden}; each must be at least 1: download or train it again.")
    head_dim = or_default(config.head_dim, hidden // heads)
    eps = float(or_default(config.rms_norm_eps, target.eps))
    rope_theta = float(or_default(config.rope_theta, target.rope_theta))
    if not (0 < eps < 1 and 0 < rope_theta < float("inf")) or head_dim < 1:
        raise DecodeError(f"Head {folder}'s config has rms_norm_eps {eps}, rope_theta {rope_theta}, head_dim "
                          f"{head_dim}; expected 0 < rms_norm_eps < 1, a positive finite rope_theta and head_dim "
                          "at least 1: download or train it again.")
    q = need(tensors, f"{prefix}self_attn.q_proj.weight", what=f"Head {folder}")
    intermediate = int(need(tensors, f"{prefix}mlp.gate_proj.weight", what=f"Head {folder}").shape[0])
    aux = None
    draft_vocab = target.vocab
    if eagle3:
        eagle_config = or_default(config.eagle_config, EagleConfig())
        layer_ids = or_default(eagle_config.eagle_aux_hidden_state_layer_ids, None)  # its type checked as read
        aux = tuple(layer_ids) if layer_ids else default_aux_layers(target.n_layers)
        if any(not 0 <= i < target.n_layers for i in aux):
            raise DecodeError(f"Head {folder} reads target layers {list(aux)} "
                              f"(eagle_aux_hidden_state_layer_ids), but the target has {target.n_layers}.")
        draft_vocab = int(need(tensors, "lm_head.weight", what=f"Head {folder}").shape[0])
    fc = need(tensors, "fc.weight", what=f"Head {folder}")
    fc_in = len(aux or ()) * target.hidden if eagle3 else 2 * hidden
    if fc.shape[0] != hidden:
        raise DecodeError(f"Head {folder}'s fc gives {fc.shape[0]} features but its config's hidden_size is "
                          f"{hidden}; its config.json does not match its weights: download or train it again.")
    if tuple(fc.shape) != (hidden, fc_in):
        what = f"{len(aux or ())} target layers of {target.hidden}" if eagle3 else f"twice the hidden size {hidden}"
        raise DecodeError(f"Head {folder}'s fc takes {fc.shape[-1]} features but the target gives {fc_in} "
                          f"({what}; hidden_size); it was trained for another model.")
    cfg = HeadConfig(kind=kind, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                     intermediate=intermediate, vocab=target.vocab, draft_vocab=draft_vocab,
                     target_hidden=target.hidden, aux_layers=aux,
                     eps=eps, rope_theta=rope_theta,
                     fc_bias="fc.bias" in tensors, qkv_bias=f"{prefix}self_attn.q_proj.bias" in tensors)
    if tuple(q.shape) != (heads * head_dim, (2 if eagle3 else 1) * hidden):
        raise DecodeError(f"Head {folder}'s q_proj has shape {tuple(q.shape)}; num_attention_heads {heads} and "
                          f"head_dim {head_dim} do not match it.")
    head = EagleHead(cfg)
    state = {"fc.weight": fc}
    if cfg.fc_bias:
        state["fc.bias"] = tensors["fc.bias"]
    for name in ATTN:
        state[f"{name}.weight"] = need(tensors, f"{prefix}self_attn.{name}.weight", what=f"Head {folder}")
        if cfg.qkv_bias and name != "o_proj":
            state[f"{name}.bias"] = need(tensors, f"{prefix}self_attn.{name}.bias", what=f"Head {folder}")
    for name in MLP:
        state[f"{name}.weight"] = need(tensors, f"{prefix}mlp.{name}.weight", what=f"Head {folder}")
    state["post_attention_layernorm"] = need(tensors, f"{prefix}post_attention_layernorm.weight",
                                             what=f"Head {folder}")
    if eagle3:
        for name in ("input_layernorm", "hidden_norm"):
            state[name] = need(tensors, f"midlayer.{name}.weight", what=f"Head {folder}")
        state["norm"] = need(tensors, "norm.weight", what=f"Head {folder}")
        state["lm_head.weight"] = tensors["lm_head.weight"]
        offsets = tensors.get("d2t")
        if offsets is not None and tuple(offsets.shape) != (draft_vocab,):
            raise DecodeError(f"Head {folder}'s d2t has shape {tuple(offsets.shape)}, not ({draft_vocab},) as its "
                              "lm_head's rows; the file is damaged: download or train it again.")
        ids = torch.arange(draft_vocab) + (offsets.long() if offsets is not None else 0)
        if int(ids.min()) < 0 or int(ids.max()) >= target.vocab:
            raise DecodeError(f"Head {folder}'s d2t maps draft rows to ids outside the target's vocabulary "
                              f"of {target.vocab}; it was trained for another model.")
        state["draft_ids"] = ids
    else:  # the target's own LM head, shared (no copy)
        state["lm_head.weight"] = model.get_output_embeddings().weight.detach()
        state["draft_ids"] = torch.arange(target.vocab)
    _load(head, state, folder)
    return head


def _load(module: torch.nn.Module, state: dict, folder: str) -> None:
    own = module.state_dict()
    for name, tensor in state.items():
        if tuple(own[name].shape) != tuple(tensor.shape):
            raise DecodeError(f"Head {folder}'s tensor for {name} has shape {tuple(tensor.shape)}, expected "
                              f"{tuple(own[name].shape)}.")
    with torch.no_grad():
        for name, tensor in state.items():
            if name == "lm_head.weight" and tensor.dtype == torch.float32:
                lm_head = module.get_submodule("lm_head")
                lm_head.weight = torch.nn.Parameter(tensor, requires_grad=False)  # shared, no copy
            else:
                own[name].copy_(tensor.to(own[name].dtype))


def _medusa(config: HeadConfigFile, tensors: dict, target: TargetShape) -> MedusaHeads:
    names = [n.split(".") for n in tensors if n.startswith("medusa_head.")]
    found = {int(n[1]) for n in names if n[1].isdigit()}
    blocks = {int(n[2]) for n in names if len(n) > 3 and n[1] == "0" and n[2].isdigit() and n[3] == "linear"}
    n_heads = or_default(config.medusa_num_heads, len(found) or None)
    n_layers = or_default(config.medusa_num_layers, len(blocks))
    if n_heads is None:
        raise DecodeError("Head config lacks 'medusa_num_heads'; add it to config.json.")
    if not 1 <= n_heads <= 16 or not 0 <= n_layers <= 8:
        raise DecodeError(f"Head config says medusa_num_heads {n_heads}, medusa_num_layers {n_layers}; "
                          "expected 1..16 heads of 0..8 ResBlocks.")
    heads = MedusaHeads(target.hidden, target.vocab, n_heads, n_layers)
    state = {}
    for i in range(n_heads):
        for j in range(n_layers):
            for part in ("weight", "bias"):
                state[f"heads.{i}.{j}.linear.{part}"] = need(tensors, f"medusa_head.{i}.{j}.linear.{part}",
                                                             what="The Medusa head")
        state[f"heads.{i}.{n_layers}.weight"] = need(tensors, f"medusa_head.{i}.{n_layers}.weight",
                                                     (target.vocab, target.hidden), what="The Medusa head")
    hidden = tuple(state["heads.0.0.linear.weight"].shape) if n_layers else (target.hidden, target.hidden)
    if hidden != (target.hidden, target.hidden):
        raise DecodeError(f"The Medusa head's ResBlocks are {hidden[0]} wide but the target's hidden_size is "
                          f"{target.hidden}; it was trained for another model.")
    _load(heads, state, "medusa")
    return heads


def save_head(head: EagleHead, folder: str | Path, dtype=torch.float16,
              training: TrainingReport | None = None) -> Path:
    """Write ``head`` in the EAGLE-3 layout (``midlayer.*``, ``d2t``) with a config that says it all.

    Published together: the weights carry a new id in their header's metadata (``tui_decode_id``),
    ``training.json`` (``training``, when given) names it, and ``config.json``, written last, names
    it too; a head whose config and weights name two ids was cut off between them and is refused
    on load (`decoders.backends.heads.formats.read_head_files`)."""
    from safetensors.torch import save

    from decoders.records.atomic import write_bytes
    from decoders.records.folder import kill_point, new_id

    c = head.config
    if c.kind != "eagle3":
        raise ValueError("only EAGLE-3 heads are saved here")
    folder = Path(folder)
    sd = head.state_dict()
    tensors = {"fc.weight": sd["fc.weight"], "norm.weight": sd["norm"], "lm_head.weight": sd["lm_head.weight"],
               "d2t": sd["draft_ids"] - torch.arange(c.draft_vocab), "midlayer.post_attention_layernorm.weight":
               sd["post_attention_layernorm"], "midlayer.input_layernorm.weight": sd["input_layernorm"],
               "midlayer.hidden_norm.weight": sd["hidden_norm"]}
    for name in ATTN:
        tensors[f"midlayer.self_attn.{name}.weight"] = sd[f"{name}.weight"]
    for name in MLP:
        tensors[f"midlayer.mlp.{name}.weight"] = sd[f"{name}.weight"]
    tensors = {k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
    config = HeadConfigFile(
        architectures=["LlamaForCausalLMEagle3"], tui_decode_format="eagle3", hidden_size=c.hidden,
        num_attention_heads=c.heads, num_key_value_heads=c.kv_heads, head_dim=c.head_dim,
        intermediate_size=c.intermediate, vocab_size=c.vocab, draft_vocab_size=c.draft_vocab, rms_norm_eps=c.eps,
        rope_theta=c.rope_theta, num_hidden_layers=1,
        eagle_config=EagleConfig(eagle_aux_hidden_state_layer_ids=list(c.aux_layers or ())),
        tui_decode_training=training if training is not None else msgspec.UNSET)
    folder.mkdir(parents=True, exist_ok=True)
    head_id = new_id()
    config.tui_decode_weights_id = head_id
    write_bytes(folder / WEIGHTS_FILE, save(tensors, metadata={WEIGHTS_ID_KEY: head_id}), "the head's weights")
    kill_point("head:config")  # a test stops here: new weights, the config (and report) of the last save
    if training is not None:
        training.head_id = head_id
        training.write(folder / TrainingReport.FILE)
    config.write(folder / "config.json")
    return folder
