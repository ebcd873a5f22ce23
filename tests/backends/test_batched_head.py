"""Speculative decoding with a trained head at batch B on torch (`decoders.methods.batch.head_draft`):
an EAGLE-1/2, EAGLE-3 or Medusa head drafts every row's chain from the target's hidden states,
which the target's verify forward leaves beside its logits. Each row's greedy output equals its
batch-1 output, and each row's drafts, iteration by iteration, are those the batch-1 head draft
(`decoders.backends.heads`, following the target through `KVRunner.follow`) makes for the same
sequence. Tiny random models and heads, seconds."""

from __future__ import annotations

import pytest
import torch

from decoders.backends.batched import BatchedLM
from decoders.backends.heads import head_draft
from decoders.backends.heads.batched import batched_head
from decoders.backends.hf import HFBackend
from decoders.backends.runner import KVRunner
from decoders.methods.batch.chain import decode_batch
from decoders.methods.batch.head_draft import HeadDraft
from decoders.methods.shared.common import draft_chain
from tests.backends.test_batched import PROMPTS, greedy_alone
from tests.support.engine import peaked_model
from tests.support.heads import write_head

FORMATS = ["eagle1", "eagle3", "medusa"]
MEDUSA_HEADS = 3  # tests.support.heads writes three


@pytest.fixture(scope="module")
def model():
    return peaked_model(layers=5)  # five layers: the EAGLE-3 head reads the inputs of layers 1, 2 and 3


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("heads")
    for fmt in FORMATS:
        write_head(root / fmt, fmt)
    return root


class Recorded(HeadDraft):
    """The head draft, keeping what it proposed for each sequence (by its prompt's first token)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.proposed: dict[int, list[list[int]]] = {}

    def propose(self, seqs, budgets):
        drafts = super().propose(seqs, budgets)
        for seq, draft in zip(seqs, drafts, strict=True):
            self.proposed.setdefault(seq[0], []).append(draft)
        return drafts


def batched(model, folder, prompts, max_new, gamma, stop=frozenset()):
    target = BatchedLM(model)
    head, layers = batched_head(head_draft(folder, HFBackend(model), model))
    draft = Recorded(target, head, layers, gamma)
    return decode_batch(target, prompts, max_new, "spec", stop_ids=stop, draft=draft), draft.proposed


def alone(model, folder, prompt, max_new, gamma, medusa):
    """Batch 1 through the engine's own pieces: the head's draft backend following the target's
    runner (its catch-up over the verified positions), greedy, as `decoders.methods.speculative`
    drafts and verifies a chain. The output and every iteration's drafts."""
    T = KVRunner(HFBackend(model))
    D = KVRunner(head_draft(folder, T.backend, model))
    assert D.follow(T) is None
    seq = list(prompt) + [int(T.run(prompt)[0].argmax())]
    drafted = []
    while len(seq) - len(prompt) < max_new:
        budget = min(gamma, MEDUSA_HEADS if medusa else gamma, max_new - (len(seq) - len(prompt)) - 1)
        if budget == 0:  # a plain step: nothing drafted
            seq.append(int(T.run(seq)[0].argmax()))
            drafted.append([])
            continue
        chain, _ = draft_chain(D, seq, budget, lambda row: (row.argmax().view(1), None))
        tail = torch.cat(chain)
        best = T.run(seq, keep=budget + 1, tail=tail).argmax(-1).tolist()
        draft = tail.tolist()
        D.name_tail(draft[:-1])
        T.name_tail(draft)
        n = next((i for i, (d, b) in enumerate(zip(draft, best, strict=False)) if d != b), len(draft))
        drafted.append(draft)
        seq += draft[:n] + [best[n]]
    return seq[len(prompt):][:max_new], drafted


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("batch", [1, 2, 3])
def test_every_row_decodes_and_drafts_what_it_does_at_batch_1(model, folders, fmt, batch):
    prompts = PROMPTS[:batch]  # ragged: 11, 3 and 14 tokens
    max_new, gamma = 24, 4
    expected = [greedy_alone(model, p, max_new) for p in prompts]
    others = {t for want in expected[:-1] for t in want}
    stop = frozenset({next(t for t in expected[-1][4:] if t not in others)}) if batch > 1 else frozenset()
    run, proposed = batched(model, folders / fmt, prompts, max_new, gamma, stop)
    for prompt, row, want in zip(prompts, run.rows, expected, strict=True):
        cut = next((j + 1 for j, t in enumerate(want) if t in stop), len(want))
        assert row.out == want[:cut]
        out, drafts = alone(model, folders / fmt, prompt, max_new, gamma, fmt == "medusa")
        assert out == want  # the batch-1 reference is itself right
        mine = proposed[prompt[0]]
        assert mine == drafts[: len(mine)]  # each iteration's chain, token for token
        assert len(mine) == row.iterations - 1 and sum(map(len, mine)) == row.drafted
    if batch > 1:
        assert run.rows[-1].finish == "eos" and len(run.rows[-1].out) < max_new  # the last row leaves early
    if fmt == "medusa":
        assert max(len(d) for ds in proposed.values() for d in ds) == MEDUSA_HEADS  # no head beyond its last


def corrected(draft: list[int], n: int) -> int:
    """The target's token after ``n`` accepted drafts, as a forced verdict says (any token will do)."""
    return (draft[n] + 1) % 64 if n < len(draft) else 7


#: Accepted counts forced on three rows, iteration by iteration (γ 3): none, some, all.
FORCED = [[2, 0, 3], [3, 1, 0], [0, 3, 2], [1, 2, 1]]


def forced_batched(model, folder, prompts, gamma):
    target = BatchedLM(model)
    head, layers = batched_head(head_draft(folder, HFBackend(model), model))
    draft = HeadDraft(target, head, layers, gamma)
    first = target.start(prompts).argmax(-1).tolist()
    draft.start(prompts)
    seqs = [list(p) + [t] for p, t in zip(prompts, first, strict=True)]
    proposals = []
    for accepted in FORCED:
        drafts = draft.propose(seqs, [gamma] * len(seqs))
        proposals.append(drafts)
        target.step([[seq[-1]] + d for seq, d in zip(seqs, drafts, strict=True)])
        target.commit([1 + n for n in accepted])
        draft.settle(accepted)
        seqs = [seq + d[:n] + [corrected(d, n)] for seq, d, n in zip(seqs, drafts, accepted, strict=True)]
    return proposals


def forced_alone(model, folder, prompt, gamma, accepted):
    T = KVRunner(HFBackend(model))
    D = KVRunner(head_draft(folder, T.backend, model))
    D.follow(T)
    seq = list(prompt) + [int(T.run(prompt)[0].argmax())]
    proposals = []
    for n in accepted:
        chain, _ = draft_chain(D, seq, gamma, lambda row: (row.argmax().view(1), None))
        tail = torch.cat(chain)
        T.run(seq, keep=gamma + 1, tail=tail)
        draft = tail.tolist()
        D.name_tail(draft[:-1])
        T.name_tail(draft)
        proposals.append(draft)
        seq += draft[:n] + [corrected(draft, n)]
    return proposals


@pytest.mark.parametrize("fmt", FORMATS)
def test_after_accepted_drafts_each_row_drafts_from_the_verify_forwards_states(model, folders, fmt):
    """Verdicts forced on three rows (the random heads seldom guess right): after any number of
    accepted drafts, every row's next chain is the batch-1 head's for its sequence, whose catch-up
    reads the target's states of the accepted positions (EAGLE) or of the last one (Medusa)."""
    prompts = PROMPTS[:3]
    got = forced_batched(model, folders / fmt, prompts, 3)
    for b, prompt in enumerate(prompts):
        want = forced_alone(model, folders / fmt, prompt, 3, [accepted[b] for accepted in FORCED])
        assert [drafts[b] for drafts in got] == want


def test_four_rows_over_a_longer_run_decode_and_draft_as_at_batch_1(model, folders):
    run, proposed = batched(model, folders / "eagle3", PROMPTS, 40, 3)
    for prompt, row in zip(PROMPTS, run.rows, strict=True):
        out, drafts = alone(model, folders / "eagle3", prompt, 40, 3, medusa=False)
        assert row.out == out == greedy_alone(model, prompt, 40)
        assert proposed[prompt[0]] == drafts
    assert sum(r.accepted for r in run.rows) > 0


def test_the_target_keeps_its_states_only_for_a_head(model, folders):
    """A target without a head returns no states (no cost); with one, each forward's rows."""
    plain = BatchedLM(model)
    plain.start(PROMPTS[:2])
    assert plain.features is None
    target = BatchedLM(model)
    head, layers = batched_head(head_draft(folders / "eagle3", HFBackend(model), model))
    HeadDraft(target, head, layers, 2)
    target.start(PROMPTS[:2])
    assert target.features is not None and tuple(target.features.shape) == (2, 11, 3 * 32)  # three layers' inputs
    target.step([[7, 8], [9]])
    assert tuple(target.features.shape[:2]) == (2, 2)
    with torch.inference_mode():
        states = model(input_ids=torch.tensor([PROMPTS[1] + [9]]), output_hidden_states=True).hidden_states
    want = torch.cat([states[i][0, -1] for i in layers])
    torch.testing.assert_close(target.features[1, 0], want, atol=1e-4, rtol=1e-4)


def test_a_head_over_another_batch_is_refused(model, folders):
    head, layers = batched_head(head_draft(folders / "eagle1", HFBackend(model), model))
    draft = HeadDraft(BatchedLM(model), head, layers, 2)
    with pytest.raises(ValueError, match="decode with the BatchedLM it was made with"):
        decode_batch(BatchedLM(model), PROMPTS[:2], 4, "spec", draft=draft)
