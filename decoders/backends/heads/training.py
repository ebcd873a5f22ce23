"""Train an EAGLE-3 head for a target from its own answers (self-distillation), on CPU or CUDA.

1. **Features**: the target runs every corpus sample teacher-forced (one forward each, no cache),
   keeping the residual streams entering its three auxiliary layers and its own greedy choice at
   every position (the label: what the head must guess for acceptance to follow).
2. **Draft vocabulary**: the ``draft_vocab`` ids the target chose most often (FR-Spec / EAGLE-3's
   ``d2t``); the head's LM head starts from the target's own rows for them.
3. **Training-time test** (EAGLE-3): ``ttt`` unrolled steps per batch; step d feeds each row the
   head's own step d-1 output one position back, attending to the step-1 keys up to d-1 positions
   back and its own earlier steps' keys on the diagonal, the cache a real depth-d draft sees. So
   held-out acceptance at depth d below is exactly greedy drafting's (tokens are the target's).
4. **Evaluation**: on held-out samples (every ``holdout``-th), acceptance at each depth given the
   depths before it were accepted, and the mean accepted length of a ``ttt``-token chain.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from decoders.backends.heads.eagle import EagleHead, HeadConfig
from decoders.backends.heads.load import default_aux_layers, target_shape
from decoders.core.errors import DecodeError

if TYPE_CHECKING:
    from decoders.training.corpus import Corpus
    from decoders.training.feature_cache import FeatureCache

IGNORE = -100


@dataclass
class Features:
    """Per sample: token ids, auxiliary-layer features (float16) and the target's greedy labels."""

    ids: list[torch.Tensor] = field(default_factory=list)
    feats: list[torch.Tensor] = field(default_factory=list)
    labels: list[torch.Tensor] = field(default_factory=list)

    @property
    def n_tokens(self) -> int:
        return sum(int(t.numel()) for t in self.ids)


def extract(model, corpus: Corpus, aux: tuple[int, ...], samples, report: Callable[[int, int], None] | None = None,
            device="cpu", cache: FeatureCache | None = None) -> Features:
    """The features of ``samples``; those in ``cache`` are read from it, the others extracted and
    added to it (saved at the end, now and then, and when an interrupt stops the extraction)."""
    out = Features()
    vocab = int(model.get_input_embeddings().weight.shape[0])
    try:
        for n, sample in enumerate(samples):
            ids = torch.tensor(corpus.ids(sample), dtype=torch.long)
            if ids.numel() and int(ids.max()) >= vocab:
                raise DecodeError(f"The corpus {corpus.folder}'s sample {sample.key} holds token id "
                                  f"{int(ids.max())}, beyond the main model's vocabulary of {vocab}; the corpus "
                                  "was made for another model or is damaged: give another --corpus folder.")
            hit = cache.get(sample, ids) if cache is not None else None
            if hit is None:
                feats, labels = _features(model, ids.to(device), aux, sample.n_prompt)
                if cache is not None:
                    cache.put(sample, ids, feats, labels)
            else:
                feats, labels = hit
            out.ids.append(ids)
            out.feats.append(feats)
            out.labels.append(labels)
            if report:
                report(n + 1, int(ids.numel()))
    finally:  # ctrl+c or SIGTERM included: what was extracted is kept for the next run
        if cache is not None:
            cache.save()
    return out


def _features(model, ids: torch.Tensor, aux: tuple[int, ...], n_prompt: int) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.inference_mode():
        result = model(ids[None], output_hidden_states=True)
    states = result.hidden_states
    feats = torch.cat([states[i][0] for i in aux], -1).to(torch.float16).cpu()
    labels = result.logits[0].argmax(-1).cpu()
    # the loss is on the answer only (EAGLE's loss mask): the row of the last prompt token on,
    # which predicts the first answer token; the prompt is context the target never writes
    labels[: max(0, n_prompt - 1)] = IGNORE
    return feats, labels


def draft_vocabulary(labels: list[torch.Tensor], vocab: int, size: int) -> torch.Tensor:
    """The ``size`` ids the target chose most often, ascending (ties by id)."""
    chosen = torch.cat(labels)
    counts = torch.bincount(chosen[chosen >= 0], minlength=vocab)
    size = min(size, vocab)
    return counts.topk(size).indices.sort().values


def new_head(model, draft_ids: torch.Tensor, aux: tuple[int, ...] | None = None) -> EagleHead:
    """An EAGLE-3 head shaped like one of the target's layers, its LM head from the target's rows."""
    shape = target_shape(model)
    text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    head_dim = int(getattr(text, "head_dim", None) or shape.hidden // shape.heads)
    config = HeadConfig(kind="eagle3", hidden=shape.hidden, heads=shape.heads, kv_heads=shape.kv_heads,
                        head_dim=head_dim, intermediate=int(text.intermediate_size), vocab=shape.vocab,
                        draft_vocab=int(draft_ids.numel()), target_hidden=shape.hidden,
                        aux_layers=aux or default_aux_layers(shape.n_layers), eps=shape.eps,
                        rope_theta=shape.rope_theta)
    head = EagleHead(config)
    with torch.no_grad():
        head.draft_ids.copy_(draft_ids)
        head.lm_head.weight.copy_(model.get_output_embeddings().weight[draft_ids])
        head.norm.copy_(model.get_submodule(model.base_model_prefix).norm.weight)
    return head


def batches(features: Features, order: list[int], tokens: int):
    """Groups of whole samples of about ``tokens`` tokens each, in ``order``."""
    group: list[int] = []
    count = 0
    for i in order:
        group.append(i)
        count += int(features.ids[i].numel())
        if count >= tokens:
            yield group
            group, count = [], 0
    if group:
        yield group


def ttt_forward(head: EagleHead, embed: torch.Tensor, features: Features, group: list[int], steps: int,
                to_draft: torch.Tensor):
    """Per step ``(logits [R, draft_vocab], labels [R], rows [R])`` of the rows with a label, for the
    samples in ``group`` packed into one sequence of N rows (block-diagonal attention)."""
    ids = torch.cat([features.ids[i] for i in group])
    feats = torch.cat([features.feats[i] for i in group]).float()
    labels = torch.cat([features.labels[i] for i in group])
    sample = torch.cat([torch.full((int(features.ids[i].numel()),), k) for k, i in enumerate(group)])
    pos = torch.cat([torch.arange(int(features.ids[i].numel())) for i in group])
    n = int(ids.numel())
    first = pos == 0
    prev = torch.arange(n) - 1  # the row one position back, within a sample
    emb = F.embedding(ids, embed)
    feature = head.feature(feats)[prev.clamp(min=0)]
    feature = feature.masked_fill(first[:, None], 0.0)
    target = torch.where(labels >= 0, to_draft[labels.clamp(min=0)], IGNORE)
    target[first] = IGNORE  # slot 0 is never drafted from
    same = sample[:, None] == sample[None, :]
    keys_k: list[torch.Tensor] = []
    keys_v: list[torch.Tensor] = []
    logits: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    for d in range(1, steps + 1):
        attn_in, residual = head.inputs(emb, feature)
        q, k, v = head.qkv(attn_in, pos)
        keys_k.append(k)
        keys_v.append(v)
        masks = [same & (pos[None, :] <= pos[:, None] - d + 1) & (pos[None, :] >= 1)]
        for step in range(2, d + 1):  # step `step` keys on the diagonal d - step positions back
            masks.append(same & (pos[None, :] == pos[:, None] - d + step) & (pos[None, :] >= 1))
        mask = torch.cat(masks, 1)
        mask[torch.arange(n), (d - 1) * n + torch.arange(n)] = True  # every row sees itself
        attn = head.attend(q, torch.cat(keys_k), torch.cat(keys_v), mask)
        out = head.finish(residual, attn)
        # a depth-d row needs d - 1 drafted rows before it in its sample; the LM head runs only on
        # rows with a label (most of its cost)
        rows = ((target != IGNORE) & (pos >= d)).nonzero().view(-1)
        logits.append((head.logits(out[rows]), target[rows], rows))
        # the next step's row j takes this step's output at j - 1
        feature = out[prev.clamp(min=0)].masked_fill(first[:, None], 0.0)
    return logits


@dataclass
class Evaluation:
    accept: list[float]  # acceptance at depth d given depths before accepted
    mean_accepted: float  # expected accepted tokens of a len(accept)-token chain
    positions: int


def evaluate(head: EagleHead, embed, features: Features, samples: list[int], steps: int, to_draft) -> Evaluation:
    """Greedy chains from every held-out position: depth d is tried where depths 1..d-1 matched."""
    head.eval()
    hits = [0] * steps
    tries = [0] * steps
    chains = 0
    with torch.no_grad():
        for group in batches(features, samples, 1024):
            per_step = ttt_forward(head, embed, features, group, steps, to_draft)
            ok = None
            n = sum(int(features.ids[i].numel()) for i in group)
            for d, (logits, target, rows) in enumerate(per_step):
                match = torch.zeros(n, dtype=torch.bool)
                match[rows] = logits.argmax(-1) == target
                # the chain starting at row s reaches depth d + 1 at row s + d (a row past its
                # sample's end has no target, so it never matches)
                at = torch.zeros_like(match)
                at[: match.numel() - d] = match[d:]
                if ok is None:
                    reached = torch.zeros(n, dtype=torch.bool)
                    reached[rows] = True
                    chains += int(reached.sum())
                else:
                    reached = ok
                ok = reached & at
                tries[d] += int(reached.sum())
                hits[d] += int(ok.sum())
    head.train()
    accept = [h / t if t else 0.0 for h, t in zip(hits, tries, strict=True)]
    return Evaluation(accept, sum(hits) / max(1, chains), chains)


def train_steps(head: EagleHead, embed, features: Features, samples: list[int], steps: int, to_draft,
                epochs: float, lr: float, batch_tokens: int, on_step: Callable[..., None] | None = None,
                state: dict | None = None, seed: int = 0):
    """AdamW over ``epochs`` passes of ``samples``; ``on_step(step, total, loss, optimizer)``; resumes
    from ``state`` (a checkpoint's optimizer and step)."""
    params = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(seed)
    n_batches = math.ceil(sum(int(features.ids[i].numel()) for i in samples) / batch_tokens)
    total = max(1, int(n_batches * epochs))
    done = 0
    if state:
        optimizer.load_state_dict(state["optimizer"])
        done = int(state["step"])
    weights = [0.8**d for d in range(steps)]
    head.train()
    while done < total:
        order = [samples[i] for i in torch.randperm(len(samples), generator=gen).tolist()]
        for group in batches(features, order, batch_tokens):
            if done >= total:
                break
            for g in optimizer.param_groups:  # warm-up then cosine
                g["lr"] = lr * min(1.0, (done + 1) / 20) * 0.5 * (1 + math.cos(math.pi * done / total))
            per_step = ttt_forward(head, embed, features, group, steps, to_draft)
            loss = torch.stack([w * F.cross_entropy(logits, target)
                                for w, (logits, target, _) in zip(weights, per_step, strict=True)]).sum()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 0.5)
            optimizer.step()
            done += 1
            if on_step:
                on_step(done, total, float(loss.detach()), optimizer)
    return optimizer


def seconds_since(t0: float) -> float:
    return time.monotonic() - t0
