"""Which transformers models `decoders.backends.llama_fast.LlamaBackend` runs exactly, and why not the others."""

from __future__ import annotations

SUPPORTED_TYPES = ("llama", "qwen2", "mistral")
#: RoPE variants whose frequencies do not depend on the sequence length (so a table is exact).
STATIC_ROPE_TYPES = ("default", "linear", "llama3")


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _rope_type(config) -> str | None:
    """The RoPE type in either the transformers 5 (`rope_parameters`) or 4 (`rope_scaling`) form."""
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return params.get("rope_type", params.get("type", "default"))


def unsupported_reason(model) -> str | None:
    """Why `LlamaBackend` cannot run ``model`` exactly, or None when it can."""
    config = _text_config(getattr(model, "config", None))
    if config is None:
        return "no config"
    kind = getattr(config, "model_type", None)
    if kind not in SUPPORTED_TYPES:
        return f"model_type {kind!r} is not one of {SUPPORTED_TYPES}"
    base = getattr(model, "model", None)
    if base is None or not hasattr(base, "layers") or not hasattr(base, "embed_tokens"):
        return "no model.layers / model.embed_tokens"
    places = sorted({str(d) for d in (getattr(model, "hf_device_map", None) or {}).values()})
    if len(places) > 1 or "disk" in places or any(p.device.type == "meta" for p in model.parameters()):
        return (f"a device map spreads the model over {', '.join(places) or 'several devices'}; "
                "the fast backend runs a model on one device only")
    if getattr(config, "hidden_act", None) != "silu":
        return f"hidden_act {getattr(config, 'hidden_act', None)!r} is not silu"
    rope = _rope_type(config)
    if rope not in STATIC_ROPE_TYPES:
        return f"rope type {rope!r} is not one of {STATIC_ROPE_TYPES}"
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        return "attention or MLP bias"
    if kind == "mistral":
        window = getattr(config, "sliding_window", None)
        if window is not None and window < config.max_position_embeddings:
            return f"sliding window {window} is active"
    if "sliding_attention" in (getattr(config, "layer_types", None) or ()):
        return "sliding-window layers"
    if getattr(config, "use_sliding_window", False):
        return "use_sliding_window"
    if not type(base.norm).__name__.endswith("RMSNorm"):
        return f"final norm is {type(base.norm).__name__}, not RMSNorm"
    for layer in base.layers:
        attn, mlp = layer.self_attn, layer.mlp
        norms = (layer.input_layernorm, layer.post_attention_layernorm)
        if not all(type(n).__name__.endswith("RMSNorm") for n in norms):
            return "a layer norm is not RMSNorm"
        if attn.o_proj.bias is not None or any(p.bias is not None for p in (mlp.gate_proj, mlp.up_proj, mlp.down_proj)):
            return "o_proj or MLP bias"
        qkv_bias = [p.bias is not None for p in (attn.q_proj, attn.k_proj, attn.v_proj)]
        if any(qkv_bias) and not (kind == "qwen2" and all(qkv_bias)):
            return "q/k/v bias outside Qwen2"
        qk_norms = (getattr(attn, "q_norm", None), getattr(attn, "k_norm", None))
        if any(type(m).__name__.endswith("RMSNorm") for m in qk_norms):
            return "q/k norms"
    return None


def supports(model) -> bool:
    """Whether `LlamaBackend.from_hf(model)` runs ``model`` exactly (see `unsupported_reason`)."""
    try:
        return unsupported_reason(model) is None
    except AttributeError:
        return False
