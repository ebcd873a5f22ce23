"""Tiny random draft heads written in the exact tensor names of their published formats."""

from __future__ import annotations

import json

import torch
from safetensors.torch import save_file

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 32, 4, 2, 8, 48, 64
AUX = (1, 2, 3)  # the EAGLE-3 head's target layers (a 5-layer target)
DRAFT_VOCAB = 40


def rand(*shape, scale=0.3, gen):
    return (torch.randn(*shape, generator=gen) * scale).contiguous()


MEDUSA_PUBLISHED = {"medusa-pt": "medusa_lm_head.pt", "medusa-safetensors": "medusa_lm_head.safetensors"}


def write_head(folder, fmt: str, seed: int = 3):
    """A head of format ``fmt`` in its published tensor names, random weights; returns the tensors
    named as the full model holds them. ``medusa-pt`` and ``medusa-safetensors`` are the layout
    FasterDecoding/Medusa publishes: the heads' own state dict (``0.0.linear.weight``) in
    ``medusa_lm_head.pt`` or ``.safetensors`` and a config with only the Medusa fields."""
    gen = torch.Generator().manual_seed(seed)
    t: dict[str, torch.Tensor] = {}
    config = {"hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
              "intermediate_size": INTER, "vocab_size": VOCAB, "rms_norm_eps": 1e-6, "rope_theta": 10000.0}
    if fmt in MEDUSA_PUBLISHED:
        t = write_head(folder, "medusa", seed)
        (folder / "model.safetensors").unlink()
        own = {name.removeprefix("medusa_head."): tensor for name, tensor in t.items()}
        if fmt == "medusa-pt":
            torch.save(own, str(folder / MEDUSA_PUBLISHED[fmt]))
        else:
            save_file(own, str(folder / MEDUSA_PUBLISHED[fmt]))
        (folder / "config.json").write_text(json.dumps({"medusa_num_heads": 3, "medusa_num_layers": 1,
                                                        "base_model_name_or_path": "tiny/target"}))
        return t
    if fmt == "medusa":
        config |= {"medusa_num_heads": 3, "medusa_num_layers": 1}
        for i in range(3):
            t[f"medusa_head.{i}.0.linear.weight"] = rand(HIDDEN, HIDDEN, gen=gen)
            t[f"medusa_head.{i}.0.linear.bias"] = rand(HIDDEN, gen=gen)
            t[f"medusa_head.{i}.1.weight"] = rand(VOCAB, HIDDEN, scale=1.0, gen=gen)
    else:
        eagle3 = fmt == "eagle3"
        prefix = "midlayer." if eagle3 else "layers.0."
        attn_in = 2 * HIDDEN if eagle3 else HIDDEN
        t["fc.weight"] = rand(HIDDEN, (len(AUX) if eagle3 else 2) * HIDDEN, gen=gen)
        if not eagle3:
            t["fc.bias"] = rand(HIDDEN, gen=gen)
            t["layers.0.input_layernorm.weight"] = torch.full((HIDDEN,), 7.0)  # unused by EAGLE-1's first layer
        t[f"{prefix}self_attn.q_proj.weight"] = rand(HEADS * HEAD_DIM, attn_in, gen=gen)
        t[f"{prefix}self_attn.k_proj.weight"] = rand(KV_HEADS * HEAD_DIM, attn_in, gen=gen)
        t[f"{prefix}self_attn.v_proj.weight"] = rand(KV_HEADS * HEAD_DIM, attn_in, gen=gen)
        t[f"{prefix}self_attn.o_proj.weight"] = rand(HIDDEN, HEADS * HEAD_DIM, gen=gen)
        t[f"{prefix}mlp.gate_proj.weight"] = rand(INTER, HIDDEN, gen=gen)
        t[f"{prefix}mlp.up_proj.weight"] = rand(INTER, HIDDEN, gen=gen)
        t[f"{prefix}mlp.down_proj.weight"] = rand(HIDDEN, INTER, gen=gen)
        t[f"{prefix}post_attention_layernorm.weight"] = 1 + rand(HIDDEN, scale=0.1, gen=gen)
        if eagle3:
            t["midlayer.input_layernorm.weight"] = 1 + rand(HIDDEN, scale=0.1, gen=gen)
            t["midlayer.hidden_norm.weight"] = 1 + rand(HIDDEN, scale=0.1, gen=gen)
            t["norm.weight"] = 1 + rand(HIDDEN, scale=0.1, gen=gen)
            t["lm_head.weight"] = rand(DRAFT_VOCAB, HIDDEN, scale=1.0, gen=gen)
            kept = torch.randperm(VOCAB, generator=gen)[:DRAFT_VOCAB].sort().values
            t["d2t"] = kept - torch.arange(DRAFT_VOCAB)
            t["t2d"] = torch.zeros(VOCAB, dtype=torch.bool).index_fill_(0, kept, True)
            config |= {"draft_vocab_size": DRAFT_VOCAB, "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(AUX)}}
        else:
            config["bias"] = True
    folder.mkdir(parents=True, exist_ok=True)
    save_file(t, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config))
    return t
