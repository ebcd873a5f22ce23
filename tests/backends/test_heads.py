"""Trained draft heads read in their published formats draft what a reference forward says.

Each test writes a tiny random head in the exact tensor names of its format (EAGLE-1/2, EAGLE-3,
Medusa) for a tiny random Llama target, drafts with it through the runners the methods use, and
compares every draft row with a reference written here from the published papers' definitions
(a full-sequence forward, no cache): token j with the feature of position j - 1; the target's
final-norm state for EAGLE-1 and Medusa, the residual streams entering three layers for EAGLE-3;
after a rejection the head is fed the target's features, never its own guesses.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from decoders.backends.heads import head_draft
from decoders.backends.hf import HFBackend
from decoders.backends.runner import KVRunner
from decoders.core.errors import DecodeError
from decoders.models.backend_choice import make_backend
from tests.support.engine import peaked_model
from tests.support.heads import AUX, DRAFT_VOCAB, HEAD_DIM, HEADS, KV_HEADS, VOCAB, write_head


# -- the reference: published definitions, full sequence, no cache ---------------------------
def rms(x, w, eps=1e-6):
    x = x.float()
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope(x, positions):
    inv = 1.0 / (10000.0 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    ang = positions.float()[:, None] * inv
    cos, sin = torch.cat([ang, ang], -1).cos()[:, None], torch.cat([ang, ang], -1).sin()[:, None]
    x1, x2 = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def ref_layer(t, prefix, attn_in, residual):
    """One causal Llama layer over rows 0.. of ``attn_in`` (GQA, RoPE from position 0)."""
    n = attn_in.shape[0]
    pos = torch.arange(n)
    q = rope((attn_in @ t[f"{prefix}self_attn.q_proj.weight"].T).view(n, HEADS, HEAD_DIM), pos)
    k = rope((attn_in @ t[f"{prefix}self_attn.k_proj.weight"].T).view(n, KV_HEADS, HEAD_DIM), pos)
    v = (attn_in @ t[f"{prefix}self_attn.v_proj.weight"].T).view(n, KV_HEADS, HEAD_DIM)
    k, v = k.repeat_interleave(HEADS // KV_HEADS, 1), v.repeat_interleave(HEADS // KV_HEADS, 1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / HEAD_DIM**0.5
    scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, HEADS * HEAD_DIM)
    x = residual + attn @ t[f"{prefix}self_attn.o_proj.weight"].T
    h = rms(x, t[f"{prefix}post_attention_layernorm.weight"])
    gate, up = h @ t[f"{prefix}mlp.gate_proj.weight"].T, h @ t[f"{prefix}mlp.up_proj.weight"].T
    return x + (F.silu(gate) * up) @ t[f"{prefix}mlp.down_proj.weight"].T


def target_states(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    return out.hidden_states  # [0] embeddings, [i] input of layer i, [-1] after the final norm


def reference_draft(fmt, t, model, verified, bonus, steps):
    """Draft ``steps`` tokens after the target verified ``verified`` and gave ``bonus``: full-vocab
    logits of every step and the greedy tokens, by the published definitions."""
    states = target_states(model, verified)
    if fmt.startswith("medusa"):
        f = states[-1][0, -1]
        rows = [f + F.silu(f @ t[f"medusa_head.{i}.0.linear.weight"].T + t[f"medusa_head.{i}.0.linear.bias"])
                for i in range(steps)]
        logits = [r @ t[f"medusa_head.{i}.1.weight"].T for i, r in enumerate(rows)]
        return torch.stack(logits), [int(x.argmax()) for x in logits]
    eagle3 = fmt == "eagle3"
    if eagle3:
        feats = torch.cat([states[i][0] for i in AUX], -1) @ t["fc.weight"].T
    else:
        feats = states[-1][0]
    embed = model.get_input_embeddings().weight.detach()
    tokens = list(verified[1:]) + [bonus]  # rows 1..m: token j with the feature of j - 1
    features = list(feats)
    out_logits, drafted = [], []
    for _ in range(steps):
        emb = embed[torch.tensor(tokens)]
        feat = torch.stack(features[: len(tokens)])
        if eagle3:
            attn_in = torch.cat([rms(emb, t["midlayer.input_layernorm.weight"]),
                                 rms(feat, t["midlayer.hidden_norm.weight"])], -1)
            out = ref_layer(t, "midlayer.", attn_in, feat)
            logit_draft = rms(out[-1], t["norm.weight"]) @ t["lm_head.weight"].T
            logits = torch.full((VOCAB,), float("-inf"))
            logits[torch.arange(DRAFT_VOCAB) + t["d2t"]] = logit_draft
        else:
            h = torch.cat([emb, feat], -1) @ t["fc.weight"].T + t["fc.bias"]
            out = ref_layer(t, "layers.0.", h, h)
            logits = out[-1] @ model.get_output_embeddings().weight.detach().T
        token = int(logits.argmax())
        out_logits.append(logits)
        drafted.append(token)
        features.append(out[-1])  # the next row (the draft just made) takes the head's own output
        tokens.append(token)
    return torch.stack(out_logits), drafted


def target_model():
    return peaked_model(layers=5)


def runners(model, folder, fast):
    target = make_backend(model, fast=True) if fast else HFBackend(model)
    T = KVRunner(target)
    D = KVRunner(head_draft(folder, target, model))
    assert D.follow(T) is None
    return T, D


FORMATS = ["eagle1", "eagle3", "medusa", "medusa-pt", "medusa-safetensors"]


@pytest.mark.parametrize("fast", [False, True], ids=["hf-backend", "fast-backend"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_drafts_match_the_reference_forward(tmp_path, fmt, fast):
    model = target_model()
    t = write_head(tmp_path / fmt, fmt)
    T, D = runners(model, tmp_path / fmt, fast)
    prompt = [5, 9, 13, 22, 7, 31, 40, 11]
    bonus = int(T.run(prompt)[0].argmax())
    want, tokens = reference_draft(fmt, t, model, prompt, bonus, steps=3)
    got = [D.run(prompt + [bonus])[0]]
    for token in tokens[:-1]:
        got.append(D.extend(torch.tensor([token]))[0])
    got_t = torch.stack(got)
    finite = torch.isfinite(want)
    assert torch.equal(finite, torch.isfinite(got_t))  # a reduced draft vocabulary: the same rows at -inf
    torch.testing.assert_close(got_t[finite], want[finite], atol=1e-3, rtol=1e-3)
    assert [int(row.argmax()) for row in got_t] == tokens


@pytest.mark.parametrize("fmt", FORMATS)
def test_after_a_rejection_the_head_reads_the_targets_features(tmp_path, fmt):
    """Verify two drafts, accept one: the head's next draft is fed the target's features of every
    verified position (the reference over the new prefix), not its own guess of them."""
    model = target_model()
    t = write_head(tmp_path / fmt, fmt)
    T, D = runners(model, tmp_path / fmt, fast=True)
    prompt = [5, 9, 13, 22, 7, 31, 40, 11]
    bonus = int(T.run(prompt)[0].argmax())
    _, drafts = reference_draft(fmt, t, model, prompt, bonus, steps=2)
    D.run(prompt + [bonus])
    D.extend(torch.tensor([drafts[0]]))
    D.name_tail([drafts[0]])
    seq = prompt + [bonus]
    T.run(seq + drafts, keep=3)  # the target verifies both; say the first is accepted
    T.name_tail(drafts) if hasattr(T, "name_tail") else None
    accepted = seq + drafts[:1]
    new_bonus = (drafts[1] + 1) % VOCAB  # any token the target "corrected" to
    want, _ = reference_draft(fmt, t, model, accepted, new_bonus, steps=1)
    got = D.run(accepted + [new_bonus])[0]
    finite = torch.isfinite(want[0])
    torch.testing.assert_close(got[finite], want[0][finite], atol=1e-3, rtol=1e-3)


def test_a_head_for_another_model_is_refused_naming_the_field(tmp_path):
    model = target_model()
    write_head(tmp_path / "h", "eagle3")
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    (tmp_path / "h" / "config.json").write_text(json.dumps(config | {"vocab_size": 32000}))
    with pytest.raises(DecodeError, match="vocab_size 32000 but the target's vocabulary is 64"):
        head_draft(tmp_path / "h", make_backend(model, fast=True), model)
    (tmp_path / "h" / "config.json").write_text(json.dumps(config | {"eagle_config": {
        "eagle_aux_hidden_state_layer_ids": [1, 2, 9]}}))
    with pytest.raises(DecodeError, match=r"reads target layers \[1, 2, 9\].*the target has 5"):
        head_draft(tmp_path / "h", make_backend(model, fast=True), model)
    write_head(tmp_path / "e1", "eagle1")
    (tmp_path / "e1" / "config.json").write_text(json.dumps(config | {"hidden_size": 48}))
    with pytest.raises(DecodeError, match="hidden_size 48 but the target's is 32"):
        head_draft(tmp_path / "e1", make_backend(model, fast=True), model)


def test_damaged_or_unknown_heads_get_one_line(tmp_path):
    model = target_model()
    backend = make_backend(model, fast=True)
    write_head(tmp_path / "h", "eagle3")
    weights = tmp_path / "h" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:500])
    with pytest.raises(DecodeError, match="truncated or damaged"):
        head_draft(tmp_path / "h", backend, model)
    save_file({"something.weight": torch.zeros(2)}, str(weights))
    with pytest.raises(DecodeError, match="Unknown head format"):
        head_draft(tmp_path / "h", backend, model)
    tensors = write_head(tmp_path / "m", "medusa")
    del tensors["medusa_head.2.1.weight"]
    save_file(tensors, str(tmp_path / "m" / "model.safetensors"))
    with pytest.raises(DecodeError, match="lacks tensor 'medusa_head.2.1.weight'"):
        head_draft(tmp_path / "m", backend, model)
    (tmp_path / "m" / "config.json").write_text("[]")
    with pytest.raises(DecodeError, match="config.json is not a JSON object; download the head "
                                          "again, or train one with `tui-decode train-head`"):
        head_draft(tmp_path / "m", backend, model)
    (tmp_path / "m" / "config.json").unlink()
    with pytest.raises(DecodeError, match="has no config.json; .* download the head again, or train one"):
        head_draft(tmp_path / "m", backend, model)
    with pytest.raises(DecodeError, match="is not a folder"):
        head_draft(tmp_path / "nowhere", backend, model)


def hub_cache(root, repo: str, fmt: str):
    """A Hugging Face hub cache holding ``repo`` at one commit, laid out as huggingface_hub writes it."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    base = root / f"models--{repo.replace('/', '--')}"
    snapshot = base / "snapshots" / commit
    tensors = write_head(snapshot, fmt)
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)
    return tensors


def test_a_head_given_by_hub_id_loads_from_the_hub_cache_offline(tmp_path, monkeypatch):
    """--head org/name: the copy in the hub cache is used without the network (the hub is
    unreachable from the test machines); one missing from the cache is one line that says so."""
    from decoders.backends.heads.formats import resolve_head

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    t = hub_cache(tmp_path / "hub", "someone/medusa-tiny", "medusa-safetensors")
    folder = resolve_head("someone/medusa-tiny")
    assert folder.name == "0123456789abcdef0123456789abcdef01234567"
    model = target_model()
    T, D = runners(model, "someone/medusa-tiny", fast=True)
    prompt = [5, 9, 13, 22, 7, 31, 40, 11]
    bonus = int(T.run(prompt)[0].argmax())
    want, _ = reference_draft("medusa", t, model, prompt, bonus, steps=1)
    torch.testing.assert_close(D.run(prompt + [bonus])[0], want[0], atol=1e-3, rtol=1e-3)
    with pytest.raises(DecodeError, match=r"Cannot get head 'someone/not-there' from the Hugging Face hub \(the "
                                          r"Hugging Face hub cannot be reached from here and the head is not in"):
        resolve_head("someone/not-there")
    with pytest.raises(DecodeError, match=r"'no/such/thing' is not a folder; .*or a hub id such as org/name"):
        resolve_head("no/such/thing")


def test_a_published_medusa_config_without_counts_takes_them_from_the_tensors(tmp_path):
    model = target_model()
    write_head(tmp_path / "m", "medusa-pt")
    (tmp_path / "m" / "config.json").write_text(json.dumps({"base_model_name_or_path": "tiny/target"}))
    draft = head_draft(tmp_path / "m", make_backend(model, fast=True), model)
    assert draft.max_draft == 3
