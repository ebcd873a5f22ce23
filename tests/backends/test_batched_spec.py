"""Speculative decoding with a draft model at batch B on torch (`decoders.methods.batch.model_draft`):
the helper drafts every row's chain in γ batched steps in its own cache (rows at their own
lengths, rejected drafts rolled back per row), the target verifies every row's chain in one
forward; each row's greedy output equals its batch-1 output, and each row drafts and accepts what
it does alone. Tiny in-memory models, seconds."""

from __future__ import annotations

import pytest
import torch

from decoders.backends.batched import BatchedLM
from decoders.backends.hf import HFBackend
from decoders.core.errors import DecodeError
from decoders.methods.batch.chain import decode_batch
from decoders.methods.batch.model_draft import ModelDraft, unbatched_draft
from tests.backends.test_batched import PROMPTS, greedy_alone
from tests.support.engine import peaked_model
from tests.support.tiny import perturbed_copy


@pytest.fixture(scope="module")
def model():
    return peaked_model()


@pytest.fixture(scope="module")
def helper(model):
    return perturbed_copy(model, 0.3, seed=1)  # agrees often, not always: drafts accepted and rejected


def spec(model, helper, prompts, max_new, gamma=3, stop=frozenset(), compact_at=0.5):
    return decode_batch(BatchedLM(model), prompts, max_new, "spec", stop_ids=stop, compact_at=compact_at,
                        draft=ModelDraft(BatchedLM(helper), gamma))


@pytest.mark.parametrize("batch", [1, 2, 3])
@pytest.mark.parametrize("gamma", [1, 3])
def test_every_row_decodes_its_batch_1_output_and_drafts_what_it_drafts_alone(model, helper, batch, gamma):
    prompts = PROMPTS[:batch]  # ragged: 11, 3 and 14 tokens
    expected = [greedy_alone(model, p, 18) for p in prompts]
    others = {t for want in expected[:-1] for t in want}
    stop = frozenset({next(t for t in expected[-1][4:] if t not in others)}) if batch > 1 else frozenset()
    run = spec(model, helper, prompts, 18, gamma, stop)
    alone = [spec(model, helper, [p], 18, gamma, stop).rows[0] for p in prompts]
    for row, want, single in zip(run.rows, expected, alone, strict=True):
        cut = next((j + 1 for j, t in enumerate(want) if t in stop), len(want))
        assert row.out == want[:cut]
        assert (row.drafted, row.accepted, row.iterations) == (single.drafted, single.accepted, single.iterations)
    if batch > 1:
        assert run.rows[-1].finish == "eos" and len(run.rows[-1].out) < 18  # the last row stops early
        assert all(r.finish == "length" for r in run.rows[:-1])
    drafted = sum(r.drafted for r in run.rows)
    assert 0 < sum(r.accepted for r in run.rows) < drafted  # both accepted and rejected drafts
    assert all(r.drafted <= gamma * (r.iterations - 1) for r in run.rows)


def test_the_target_drafting_for_itself_has_every_draft_accepted(model):
    # a draft cache that kept a rejected draft, or lost an accepted one, would draft wrong tokens
    run = spec(model, model, PROMPTS, 20, gamma=4)
    for prompt, row in zip(PROMPTS, run.rows, strict=True):
        assert row.out == greedy_alone(model, prompt, 20)
        assert row.accepted == row.drafted > 0


@pytest.mark.parametrize("compact_at", [0.0, 10.0])  # squeezed every step / never
def test_compacting_both_caches_leaves_the_output_as_it_was(model, helper, compact_at):
    run = spec(model, helper, PROMPTS, 16, gamma=3, compact_at=compact_at)
    assert [row.out for row in run.rows] == [greedy_alone(model, p, 16) for p in PROMPTS]


def test_a_rollback_forgets_each_rows_own_last_tokens(model):
    lm = BatchedLM(model)
    lm.start(PROMPTS[:2])
    lm.step([[9, 10, 11], [23, 24, 25]])
    lm.commit([3, 3])
    lm.rollback([2, 0])  # row 0 keeps 9; row 1 keeps 23 24 25
    assert lm.next_pos == [len(PROMPTS[0]) + 1, len(PROMPTS[1]) + 3]
    step = lm.step([[12], [26]])
    for b, seq in enumerate([PROMPTS[0] + [9, 12], PROMPTS[1] + [23, 24, 25, 26]]):
        alone = HFBackend(model).forward(torch.tensor(seq), keep=1)[0]
        assert torch.allclose(step[b, 0], alone, atol=1e-4)
    with pytest.raises(ValueError, match="rollback takes"):
        lm.rollback([0, 0])  # before the step's commit


def test_spec_without_its_draft_model_is_refused(model):
    with pytest.raises(DecodeError, match="needs its draft model"):
        decode_batch(BatchedLM(model), PROMPTS, 4, "spec")


@pytest.mark.parametrize("kind,words", [
    (None, "needs a draft: load a helper model with --helper SRC or draft with --self-draft int4 or --self-draft "
           "head"),
    ("early-exit", "drafts with a helper model, the int4 self-draft or a trained head only, not the early-exit draft; "
                   "give --helper SRC, --self-draft int4 or --self-draft head, or drop spec from --methods"),
])
def test_a_draft_that_does_not_run_batched_is_named(kind, words):
    assert words in (unbatched_draft(kind) or "")
    assert all(unbatched_draft(kind) is None for kind in ("helper", "int4", "head"))


def test_the_int4_copy_is_the_int4_self_draft_sharing_the_main_models_tensors(model):
    from decoders.backends.batched_int4 import int4_copy
    from decoders.backends.llama_fast import LlamaBackend
    from decoders.backends.quantized import QuantizedLlamaBackend

    draft = int4_copy(model)
    ids = torch.tensor(PROMPTS[2])
    alone = QuantizedLlamaBackend.from_target(LlamaBackend.from_hf(model), model).forward(ids, keep=len(ids))
    with torch.inference_mode():
        ours = draft(input_ids=ids.view(1, -1)).logits[0]
        target = model(input_ids=ids.view(1, -1)).logits[0]
    # the same int4 weights as the one-sequence draft (bfloat16 rounding apart), far from the target's
    assert (ours - alone).abs().max() < 0.05 * (target - alone).abs().max()
    assert draft.model.embed_tokens.weight is model.model.embed_tokens.weight  # shared, not copied
    assert type(model.model.layers[0].self_attn.q_proj) is torch.nn.Linear  # the main model left as it was


@pytest.mark.parametrize("batch", [1, 2, 3])
def test_the_int4_draft_decodes_every_rows_batch_1_output(model, batch):
    from decoders.backends.batched_int4 import int4_copy

    prompts = PROMPTS[:batch]
    run = decode_batch(BatchedLM(model), prompts, 16, "spec", draft=ModelDraft(BatchedLM(int4_copy(model)), 4))
    assert [row.out for row in run.rows] == [greedy_alone(model, p, 16) for p in prompts]
    assert sum(r.accepted for r in run.rows) > 0
