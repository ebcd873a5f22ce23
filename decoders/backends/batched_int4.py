"""The int4 self-draft as a transformers module, so that it drafts at batch B through `BatchedLM`
(per-row positions and masks), where the one-sequence int4 draft (`decoders.backends.quantized`'s
`QuantizedLlamaBackend`) cannot.

`int4_copy` shares every parameter of the main model (embedding, norms, LM head: no copy) and
replaces each decoder-layer projection with `Int4Projection`: the same group-wise weight-only int4
and packed kernel as the one-sequence draft (`quantize_int4`, `Int4Linear`; a row's groups lie
along its inputs, so quantizing q, k and v apart gives the fused matrix's values), bfloat16
activations into the kernel, the product back in the model's dtype. The kernel's shape limits are
`decoders.backends.quantized.unsupported_reason`'s.
"""

from __future__ import annotations

import copy
import itertools

import torch

from decoders.backends.quantized import DEFAULT_GROUP, Int4Linear, unsupported_reason

#: The projections of a Llama decoder layer that go int4 (attention's, then the MLP's).
PROJECTIONS = (("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")), ("mlp", ("gate_proj", "up_proj", "down_proj")))


class Int4Projection(torch.nn.Module):
    """``nn.Linear``'s forward on a weight held as packed int4 (any leading dimensions)."""

    def __init__(self, linear: torch.nn.Linear, group: int):
        super().__init__()
        self.matmul = Int4Linear(linear.weight.detach(), group)
        self.bias = None if linear.bias is None else linear.bias.detach()
        self.dtype = linear.weight.dtype
        self.out_features = int(linear.weight.shape[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.matmul(x.reshape(-1, x.shape[-1])).to(self.dtype).reshape(*x.shape[:-1], self.out_features)
        return out if self.bias is None else out + self.bias


def int4_copy(model, group: int = DEFAULT_GROUP):
    """``model`` with its decoder-layer projections in int4, sharing all its other parameters;
    ValueError says why the kernel cannot take it."""
    reason = unsupported_reason(model, "int4", group)
    if reason is not None:
        raise ValueError(reason)
    shared = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    draft = copy.deepcopy(model, memo=shared)  # new modules around the same tensors
    with torch.no_grad():
        for layer in draft.model.layers:
            for part, names in PROJECTIONS:
                block = getattr(layer, part)
                for name in names:
                    setattr(block, name, Int4Projection(getattr(block, name), group))
    return draft.eval()
