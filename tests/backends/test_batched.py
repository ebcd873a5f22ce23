"""Batched decoding on the torch backend (`decoders.backends.batched`, `decoders.methods.batch`):
B prompts of different lengths decoded together, each row at its own positions behind its own
mask, each accepting its own prefix in the same forward, finished rows leaving the batch; every
row's greedy output equals its batch-1 output. Tiny in-memory models, seconds."""

from __future__ import annotations

import pytest
import torch

from decoders.backends.batched import BatchedLM, batch_unsupported
from decoders.backends.hf import HFBackend
from decoders.backends.runner import KVRunner
from decoders.methods.batch.chain import decode_batch
from tests.support.engine import peaked_model

#: Prompts of different lengths with repeats in them (prompt lookup finds something to copy).
PROMPTS = [
    [5, 6, 7, 8, 5, 6, 7, 9, 10, 5, 6],
    [20, 21, 22],
    [30, 31, 32, 33, 34, 30, 31, 32, 33, 35, 36, 37, 30, 31],
    [40, 41, 40, 41, 40],
]


@pytest.fixture(scope="module")
def model():
    return peaked_model()


def greedy_alone(model, prompt: list[int], tokens: int) -> list[int]:
    """The single-sequence greedy output through the engine's own runner (batch 1, no batching code)."""
    runner = KVRunner(HFBackend(model))
    seq = list(prompt)
    for _ in range(tokens):
        seq.append(int(runner.run(seq)[0].argmax()))
    return seq[len(prompt):]


def test_the_model_can_be_batched(model):
    assert batch_unsupported(model) is None


def test_one_step_over_ragged_rows_gives_each_rows_own_logits(model):
    lm = BatchedLM(model)
    first = lm.start(PROMPTS[:2])
    for b, prompt in enumerate(PROMPTS[:2]):
        alone = HFBackend(model).forward(torch.tensor(prompt), keep=1)[0]
        assert torch.allclose(first[b], alone, atol=1e-4)
    step = lm.step([[9, 10, 11], [23]])  # three new tokens on row 0, one on row 1 (padded)
    for b, (prompt, new) in enumerate([(PROMPTS[0], [9, 10, 11]), (PROMPTS[1], [23])]):
        alone = HFBackend(model).forward(torch.tensor(prompt + new), keep=len(new))
        assert torch.allclose(step[b, : len(new)], alone, atol=1e-4)


@pytest.mark.parametrize("method", ["ar", "pld"])
def test_every_row_decodes_its_batch_1_output(model, method):
    run = decode_batch(BatchedLM(model), PROMPTS, 20, method, gamma=4)
    for prompt, row in zip(PROMPTS, run.rows, strict=True):
        assert row.out == greedy_alone(model, prompt, 20)
    assert run.tokens == 80 and run.batch == 4
    if method == "ar":
        assert run.forwards == 20 and all(row.drafted == 0 for row in run.rows)


class RightFor:
    """Row ``right``'s drafter: ``right`` tokens of its batch-1 output, then a wrong one."""

    def __init__(self, seq, expected, right):
        self.prompt_len, self.expected, self.right = len(seq) - 1, expected, right

    def propose(self, seq, budget):
        at = len(seq) - self.prompt_len
        good = self.expected[at: at + min(self.right, budget)]
        return good + [(self.expected[at + len(good)] + 1) % 64] if at + len(good) < len(self.expected) and \
            len(good) < budget else good

    def extend(self, seq):
        pass


def test_each_row_accepts_its_own_prefix_in_the_same_forward(model):
    expected = {tuple(p): greedy_alone(model, p, 20) for p in PROMPTS}
    rights = {tuple(p): i for i, p in enumerate(PROMPTS)}  # row i drafts i right tokens, then a wrong one

    def make(seq):
        prompt = next(p for p in PROMPTS if seq[: len(p)] == p and len(seq) == len(p) + 1)
        return RightFor(seq, expected[tuple(prompt)], rights[tuple(prompt)])

    run = decode_batch(BatchedLM(model), PROMPTS, 20, make=make)
    for prompt, row in zip(PROMPTS, run.rows, strict=True):
        assert row.out == expected[tuple(prompt)]
    # every iteration after the prefill: row i accepts i drafts and emits i + 1 tokens
    assert [row.iterations for row in run.rows] == [1 + 19, 1 + 10, 1 + 7, 1 + 5]
    assert [row.accepted for row in run.rows] == [0, 9, 12, 14]


@pytest.mark.parametrize("compact_at", [0.0, 10.0])  # squeezed every step / never
def test_holes_and_their_compaction_leave_the_output_as_it_was(model, compact_at):
    run = decode_batch(BatchedLM(model), PROMPTS, 16, "pld", gamma=6, compact_at=compact_at)
    assert [row.out for row in run.rows] == [greedy_alone(model, p, 16) for p in PROMPTS]


def test_a_finished_row_leaves_the_batch_and_the_others_go_on(model, monkeypatch):
    expected = [greedy_alone(model, p, 20) for p in PROMPTS]
    stop = expected[1][4]  # row 1 stops at its fifth token
    shapes: list[int] = []
    real_step = BatchedLM.step

    def step(self, new):
        shapes.append(len(new))
        return real_step(self, new)

    monkeypatch.setattr(BatchedLM, "step", step)
    run = decode_batch(BatchedLM(model), PROMPTS, 20, "ar", stop_ids=frozenset({stop}))
    row = run.rows[1]
    assert row.finish == "eos" and row.out == expected[1][: expected[1].index(stop) + 1]
    for other, want in zip(run.rows, expected, strict=True):
        if other.finish == "length":
            assert other.out == want
    assert shapes[0] == 4 and min(shapes) < 4  # fewer rows once one finished


def test_bad_steps_are_refused(model):
    lm = BatchedLM(model)
    lm.start(PROMPTS[:2])
    with pytest.raises(ValueError, match="step needs 1\\+ new tokens for each of the 2 rows"):
        lm.step([[1]])
    lm.step([[1, 2], [3]])
    with pytest.raises(ValueError, match="kept must give 0..2 for each of the 2 rows"):
        lm.commit([3, 1])


def test_the_step_callback_sees_every_row_grow_and_its_time_stays_off_the_clock(model):
    """``on_step`` (a screen's progress, issue 39) gets every row's record after the prefill and
    each iteration; what it spends is taken off the run's wall time and each row's done time."""
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # every reading of the clock: one unit
        return now[0]

    plain = decode_batch(BatchedLM(model, 256), PROMPTS, 12, "pld", gamma=3, clock=clock)
    seen: list[list[int]] = []

    def on_step(rows) -> None:
        seen.append([len(r.out) for r in rows])
        now[0] += 1000.0  # a slow draw: none of it may land on the run's clock

    now[0] = 0.0
    watched = decode_batch(BatchedLM(model, 256), PROMPTS, 12, "pld", gamma=3, clock=clock, on_step=on_step)
    assert [r.out for r in watched.rows] == [r.out for r in plain.rows]
    assert len(seen) == watched.forwards  # the prefill and every iteration
    assert seen[0] == [1] * len(PROMPTS) and seen[-1] == [len(r.out) for r in watched.rows]
    assert all(a <= b for before, after in zip(seen, seen[1:], strict=False)
               for a, b in zip(before, after, strict=True))
    assert watched.wall_s < 1000.0 and all(r.done_s < 1000.0 for r in watched.rows)
