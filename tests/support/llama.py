"""Random Llama, Qwen2 and Mistral models with weights that matter (norms away from one, Qwen2's
biases set), token ids, and the closeness check the fast-backend tests use."""

from __future__ import annotations

import torch

VOCAB = 101
ATOL = 1e-5  # float32; observed differences are ~2e-7


def _config(kind: str, **extra):
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    cls = {"llama": LlamaConfig, "qwen2": Qwen2Config, "mistral": MistralConfig}[kind]
    args = dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=256,
    )
    if kind == "mistral":
        args["sliding_window"] = None
    args.update(extra)
    return cls(**args)


def _model(kind: str = "llama", seed: int = 0, **extra):
    from transformers import LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM

    cls = {"llama": LlamaForCausalLM, "qwen2": Qwen2ForCausalLM, "mistral": MistralForCausalLM}[kind]
    torch.manual_seed(seed)
    model = cls(_config(kind, **extra)).eval()
    # random init leaves norm weights at one and biases at zero; make them matter (the backend
    # folds norm weights into its matrices and reorders q/k biases)
    with torch.no_grad():
        layer_norms = [n for x in model.model.layers for n in (x.input_layernorm, x.post_attention_layernorm)]
        for norm in [model.model.norm] + layer_norms:
            norm.weight.uniform_(0.5, 1.5)
        if kind == "qwen2":
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_(0, 0.5)
    return model


def _ids(n: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(seed))


def _hf_logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(ids[None]).logits[0].float()


def _close(a, b, atol=ATOL):
    diff = (a - b).abs().max().item()
    assert diff < atol, f"max |diff| {diff:.2e}"


KINDS = ["llama", "qwen2", "mistral"]
