"""An EAGLE draft head: one decoder layer over the target's own features (Li et al. 2024, 2025).

Two published shapes share this module:

* **EAGLE-1/2**: ``fc`` maps ``[embed(token_j), f_{j-1}]`` (the target's last hidden state after
  its final norm, one position back) to the hidden size; the layer has no input norm; its output
  regresses ``f_j`` and goes straight into the target's LM head.
* **EAGLE-3**: ``fc`` maps three of the target's residual streams (entering its low, middle and
  high layers) to the hidden size; the layer's attention reads ``[input_norm(embed(token_j)),
  hidden_norm(h_{j-1})]`` (twice the hidden size), then a final ``norm`` and the head's own LM
  head over a reduced draft vocabulary (``d2t``: draft row -> target id).

Alignment, the detail ports get wrong: row ``j`` of the head combines token ``j`` with the feature
of position ``j - 1`` (the state that predicted token ``j``), and its output predicts token
``j + 1``. Slot ``j`` here is position ``j``; slot 0 (no feature before it) is never attended to,
which is EAGLE's dropping of the first position (RoPE is relative, so nothing else moves).

For every position the target verified, the head's row is fed the target's feature (through
`decoders.backends.features.FeatureTap`), never its own; only the rows it drafts beyond what the
target has seen take its own output as the next feature.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

KINDS = ("eagle1", "eagle3")


@dataclass(frozen=True)
class HeadConfig:
    kind: str  # "eagle1" | "eagle3"
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int  # the target's vocabulary
    draft_vocab: int  # rows of the head's LM head (== vocab when it covers everything)
    target_hidden: int
    aux_layers: tuple[int, ...] | None  # EAGLE-3: the target layers whose inputs it reads
    eps: float = 1e-5
    rope_theta: float = 10000.0
    fc_bias: bool = False
    qkv_bias: bool = False


def rms(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def rope_tables(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device) / head_dim))
    angles = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' RoPE (``rotate_half`` layout) on ``x [n, heads, head_dim]``."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


class EagleHead(nn.Module):
    """The head's weights, trainable (`decoders.training.train`) and used to draft (`EagleDraft`)."""

    def __init__(self, config: HeadConfig):
        super().__init__()
        c = self.config = config
        eagle3 = c.kind == "eagle3"
        fc_in = (len(c.aux_layers or ()) * c.target_hidden) if eagle3 else 2 * c.hidden
        attn_in = 2 * c.hidden if eagle3 else c.hidden
        self.fc = nn.Linear(fc_in, c.hidden, bias=c.fc_bias)
        self.q_proj = nn.Linear(attn_in, c.heads * c.head_dim, bias=c.qkv_bias)
        self.k_proj = nn.Linear(attn_in, c.kv_heads * c.head_dim, bias=c.qkv_bias)
        self.v_proj = nn.Linear(attn_in, c.kv_heads * c.head_dim, bias=c.qkv_bias)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)
        self.gate_proj = nn.Linear(c.hidden, c.intermediate, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.intermediate, bias=False)
        self.down_proj = nn.Linear(c.intermediate, c.hidden, bias=False)
        self.post_attention_layernorm = nn.Parameter(torch.ones(c.hidden))
        if eagle3:
            self.input_layernorm = nn.Parameter(torch.ones(c.hidden))
            self.hidden_norm = nn.Parameter(torch.ones(c.hidden))
            self.norm = nn.Parameter(torch.ones(c.hidden))
        self.lm_head = nn.Linear(c.hidden, c.draft_vocab, bias=False)
        # the target id of each draft row (all ids in order when the head covers the vocabulary)
        self.draft_ids: torch.Tensor
        self.register_buffer("draft_ids", torch.arange(c.draft_vocab, dtype=torch.long))

    # -- pieces shared by drafting and training ----------------------------------------------
    def feature(self, target_feats: torch.Tensor) -> torch.Tensor:
        """The target's features as the layer's feature input (EAGLE-3: through ``fc``)."""
        return self.fc(target_feats) if self.config.kind == "eagle3" else target_feats

    def inputs(self, emb: torch.Tensor, feature: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(attention input, residual)`` of rows with token embeddings ``emb`` and features ``feature``."""
        c = self.config
        if c.kind == "eagle3":
            attn_in = torch.cat([rms(emb, self.input_layernorm, c.eps), rms(feature, self.hidden_norm, c.eps)], -1)
            return attn_in, feature
        h = self.fc(torch.cat([emb, feature], dim=-1))
        return h, h

    def qkv(self, attn_in: torch.Tensor, positions: torch.Tensor):
        """Rotated ``q [n, heads, d]``, ``k, v [n, kv_heads, d]``."""
        c = self.config
        n = attn_in.shape[0]
        q = self.q_proj(attn_in).view(n, c.heads, c.head_dim)
        k = self.k_proj(attn_in).view(n, c.kv_heads, c.head_dim)
        v = self.v_proj(attn_in).view(n, c.kv_heads, c.head_dim)
        cos, sin = rope_tables(positions, c.head_dim, c.rope_theta)
        return rotate(q, cos, sin), rotate(k, cos, sin), v

    def attend(self, q, k, v, mask) -> torch.Tensor:
        """``q [n, heads, d]`` over ``k, v [m, kv_heads, d]`` under bool ``mask [n, m]``: ``[n, heads * d]``."""
        c = self.config
        group = c.heads // c.kv_heads
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1), k.repeat_interleave(group, 1).transpose(0, 1),
            v.repeat_interleave(group, 1).transpose(0, 1), attn_mask=mask, scale=c.head_dim**-0.5)
        return out.transpose(0, 1).reshape(q.shape[0], c.heads * c.head_dim)

    def finish(self, residual: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """The rest of the layer after attention: the head's output state ``[n, hidden]``."""
        x = residual + self.o_proj(attn)
        h = rms(x, self.post_attention_layernorm, self.config.eps)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits ``[n, draft_vocab]`` of output states (EAGLE-3 through ``norm``)."""
        if self.config.kind == "eagle3":
            out = rms(out, self.norm, self.config.eps)
        return self.lm_head(out)


def visible(queries: torch.Tensor, slots: int) -> torch.Tensor:
    """Bool ``[n, slots]``: query slot ``s`` sees slots ``1 .. s`` (slot 0 only itself)."""
    keys = torch.arange(slots, device=queries.device)
    seen = (keys[None, :] <= queries[:, None]) & (keys[None, :] >= 1)
    return seen | (keys[None, :] == queries[:, None])
