"""Batched decoding on the llama.cpp backend (`decoders.backends.llamacpp_batched`): B prompts of
different lengths in one ``llama_decode``, each row its own sequence at its own positions,
each accepting its own prefix in the same forward, finished rows leaving the batch; every row's
greedy output equals its batch-1 output on the plain llama.cpp backend (the bundled Q4_1 file, no
tokenizer). What it cannot hold is said in one line."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("llama_cpp")

from decoders.backends.llamacpp import LlamaCppBackend, LlamaModel  # noqa: E402
from decoders.backends.llamacpp_batched import LlamaCppBatched, check_batch, max_rows  # noqa: E402
from decoders.core.errors import DecodeError  # noqa: E402
from decoders.methods.batch.chain import decode_batch  # noqa: E402
from decoders.models.bundled import bundled_gguf_path  # noqa: E402

#: Prompts of different lengths, two with repeats in them (prompt lookup finds something to copy).
PROMPTS = [
    [1, 504, 3458, 282, 4106, 314, 30, 2, 3, 7, 9, 11],
    [1, 504, 3458],
    [1, 22, 33, 44, 55, 22, 33, 44, 66, 77, 22, 33],
    [1, 900, 901, 900, 901],
]
TOKENS = 10


@pytest.fixture(scope="module")
def model():
    return LlamaModel(bundled_gguf_path())


@pytest.fixture(scope="module")
def alone(model):
    """The plain llama.cpp backend (batch 1, no batching code)."""
    return LlamaCppBackend(model, max_positions=256)


@pytest.fixture(scope="module")
def expected(alone):
    """Each prompt's greedy output on the plain llama.cpp backend, one token per forward."""
    with torch.inference_mode():
        return [greedy_alone(alone, p, TOKENS) for p in PROMPTS]


def greedy_alone(backend, prompt, tokens):
    backend.reset()
    logits = backend.forward(torch.tensor(prompt), 1)
    out = []
    for _ in range(tokens):
        out.append(int(logits[0].argmax()))
        logits = backend.forward(torch.tensor(out[-1:]), 1)
    return out


def run_alone(backend, tokens, keep):
    backend.reset()
    return backend.forward(torch.tensor(tokens), keep)


def test_one_step_over_ragged_rows_gives_each_rows_own_logits(model, alone):
    lm = LlamaCppBatched(model, 4, 64)
    first = lm.start(PROMPTS)
    new = [[9, 10, 11], [23], [5], [6, 7]]  # rows of 3, 1, 1 and 2 new tokens (padded to 3)
    step = lm.step(new)
    assert first.shape == (4, 49152) and step.shape == (4, 3, 49152)
    for b, prompt in enumerate(PROMPTS):
        want = run_alone(alone, prompt + new[b], len(new[b]) + 1)
        # llama.cpp's kernels give a row the same logits in any batch here (exactly, on the bundled file)
        torch.testing.assert_close(first[b], want[0], atol=1e-3, rtol=0)
        torch.testing.assert_close(step[b, : len(new[b])], want[1:], atol=1e-3, rtol=0)


@pytest.mark.parametrize("method", ["ar", "pld"])
def test_every_row_decodes_its_batch_1_output(model, expected, method):
    run = decode_batch(LlamaCppBatched(model, 4, 64), PROMPTS, TOKENS, method, gamma=4)
    assert [row.out for row in run.rows] == expected
    assert run.tokens == 4 * TOKENS and run.batch == 4
    if method == "ar":
        assert run.forwards == TOKENS and all(row.drafted == 0 for row in run.rows)
    else:  # rows 2 and 3 copy from their repeats
        assert run.rows[2].accepted > 0 and run.rows[3].accepted > 0


class RightFor:
    """A row's drafter: ``right`` tokens of its batch-1 output, then a wrong one."""

    def __init__(self, seq, prompt, expected, right):
        self.prompt_len, self.expected, self.right = len(prompt), expected, right

    def propose(self, seq, budget):
        at = len(seq) - self.prompt_len
        good = self.expected[at: at + min(self.right, budget)]
        if at + len(good) < len(self.expected) and len(good) < budget:
            return good + [(self.expected[at + len(good)] + 1) % 49152]
        return good

    def extend(self, seq):
        pass


def test_each_row_accepts_its_own_prefix_in_the_same_forward(model, expected):
    def make(seq):  # row i drafts i right tokens, then a wrong one
        i = next(i for i, p in enumerate(PROMPTS) if seq[: len(p)] == p and len(seq) == len(p) + 1)
        return RightFor(seq, PROMPTS[i], expected[i], i)

    run = decode_batch(LlamaCppBatched(model, 4, 64), PROMPTS, TOKENS, make=make)
    assert [row.out for row in run.rows] == expected
    # after the prefill, row i accepts i drafts and emits i + 1 tokens an iteration
    assert [row.iterations for row in run.rows] == [1 + 9, 1 + 5, 1 + 3, 1 + 3]
    assert [row.accepted for row in run.rows] == [0, 4, 6, 6]


@pytest.mark.parametrize("leaving", [0, 1, 3])  # the first row, a middle one, the last one
def test_a_finished_row_leaves_the_batch_and_the_others_go_on(model, expected, monkeypatch, leaving):
    stop = expected[leaving][3]  # that row stops at its fourth token
    widths: list[int] = []
    real_step = LlamaCppBatched.step

    def step(self, new):
        widths.append(len(new))
        return real_step(self, new)

    monkeypatch.setattr(LlamaCppBatched, "step", step)
    run = decode_batch(LlamaCppBatched(model, 4, 64), PROMPTS, TOKENS, "ar", stop_ids=frozenset({stop}))
    row = run.rows[leaving]
    assert row.finish == "eos" and row.out == expected[leaving][: expected[leaving].index(stop) + 1]
    for other, want in zip(run.rows, expected, strict=True):  # the others, in their moved sequences
        if other.finish == "length":
            assert other.out == want
        else:
            assert other.out == want[: want.index(stop) + 1]
    assert widths[0] == 4 and min(widths) < 4  # fewer rows once one finished


def test_a_context_is_reused_and_a_crop_rolls_every_row_back(model, alone, expected):
    lm = LlamaCppBatched(model, 4, 64)
    decode_batch(lm, PROMPTS[:2], 2, "ar")
    again = decode_batch(lm, PROMPTS, TOKENS, "pld", gamma=3)  # start clears what the first batch left
    assert [row.out for row in again.rows] == expected
    first = lm.start(PROMPTS[:2])
    lm.step([[7, 8, 9]] * 2)
    lm.crop(len(PROMPTS[1]))  # row 0 loses its prompt's tail too
    assert lm.next_pos == [3, 3] and lm.slots == 3
    torch.testing.assert_close(lm.step([[4106], [282]])[:, 0], torch.stack([
        run_alone(alone, PROMPTS[0][:3] + [4106], 1)[0], run_alone(alone, PROMPTS[1] + [282], 1)[0]]),
        atol=1e-3, rtol=0)
    assert first.shape == (2, 49152)


def test_bad_steps_and_batches_are_refused(model):
    lm = LlamaCppBatched(model, 2, 32)
    assert lm.positions == 256 == model.lib.llama_n_ctx_seq(lm.ctx)  # a stream's cells, padded to 256
    with pytest.raises(DecodeError, match="batch size 3 is above the 2 sequences this llama.cpp context was made for"):
        lm.start(PROMPTS[:3])
    lm.start(PROMPTS[:2])
    with pytest.raises(ValueError, match="step needs 1\\+ new tokens for each of the 2 rows"):
        lm.step([[1]])
    lm.step([[1, 2], [3]])
    with pytest.raises(ValueError, match="kept must give 0..2 for each of the 2 rows"):
        lm.commit([3, 1])
    lm.commit([2, 1])
    with pytest.raises(DecodeError) as err:
        lm.step([[1] * 250, [2]])
    assert str(err.value) == ("a sequence reached 264 positions, beyond the 256 each sequence of this llama.cpp batch "
                              "holds; lower max_new_tokens or the draft length")


def test_a_batch_llama_cpp_cannot_hold_is_one_line(model):
    bound = max_rows(model)
    assert bound == 256
    with pytest.raises(DecodeError) as err:
        LlamaCppBatched(model, bound + 1, 32)
    assert str(err.value) == ("batch size 257 is above the 256 sequences one llama.cpp context holds (n_seq_max); "
                              "give --batch sizes up to 256")
    with pytest.raises(DecodeError, match="batch size 300 is above the 256 sequences"):
        check_batch(model, [1, 300], positions=100, width=5, available=None)
    with pytest.raises(DecodeError) as err:
        check_batch(model, [1, 2], positions=8200, width=5, available=None)
    assert str(err.value) == ("each sequence needs 8200 positions (prompt, --max-new-tokens and a step's width), "
                              "beyond the model's context of 8192; lower --max-new-tokens or --num-pred")
    with pytest.raises(DecodeError) as err:
        check_batch(model, [1, 64], positions=1000, width=11, available=200_000_000)
    assert str(err.value).startswith("batch size 64 needs about ")
    assert str(err.value).endswith("for its llama.cpp cache and logits, more than half of the 200 MB available; "
                                   "give smaller --batch sizes or lower --max-new-tokens")
    check_batch(model, [1, 2], positions=1000, width=11, available=200_000_000)


def test_the_batch_bench_runs_on_llama_cpp(model, alone):
    """`run_batch_bench` on a llama.cpp family: T(B, k) timed on `LlamaCppBatched`, every row of
    every batch size identical to its batch-1 output."""
    from types import SimpleNamespace

    from decoders.bench.batch import batch_maker, run_batch_bench

    family = SimpleNamespace(main=alone, main_model=None, label="bundled (llama.cpp)", stop_ids=frozenset(),
                             context_length=256, describe=lambda: {"label": "bundled (llama.cpp)"})
    assert isinstance(batch_maker(family, 64)(2), LlamaCppBatched)
    report = run_batch_bench(family, [PROMPTS[1], PROMPTS[3]], [1, 2], ["ar", "pld"], 4, rounds=2, k=3, surface_repeats=1,
                             surface_widths=2)
    assert sorted(report.surface) == ["1", "2"] and len(report.surface["2"]) == 2
    assert report.surface["1"][0] == 1.0 and report.surface_unit_ms > 0
    assert [(r.method, r.batch) for r in report.rows] == [("ar", 1), ("pld", 1), ("ar", 2), ("pld", 2)]
    assert all(r.identical for r in report.rows) and report.divergences == []


def test_a_row_that_parts_from_batch_1_is_reported_with_its_margin(model, alone, monkeypatch):
    """Where a row at batch B parts from its batch-1 output, the bench reports the position and the
    batch-1 top-2 margin there (here a step's logits are bent on purpose for row 1 at batch 2)."""
    from types import SimpleNamespace

    from decoders.bench.batch import run_batch_bench

    prompts = [PROMPTS[1], PROMPTS[3]]
    real_step = LlamaCppBatched.step

    def bent(self, new):
        logits = real_step(self, new)
        if self.rows == 2 and self.next_pos[1] == len(prompts[1]) + 1:  # row 1's third token becomes token 7
            logits[1, 0, 7] = 1e4
        return logits

    monkeypatch.setattr(LlamaCppBatched, "step", bent)
    family = SimpleNamespace(main=alone, main_model=None, label="bundled (llama.cpp)", stop_ids=frozenset(),
                             context_length=256, describe=lambda: {"label": "bundled (llama.cpp)"})
    report = run_batch_bench(family, prompts, [2], ["ar"], 4, rounds=1, k=3, surface_repeats=1, surface_widths=1)
    assert [r.identical for r in report.rows] == [False]
    [d] = report.divergences
    assert (d.method, d.batch, d.row, d.position) == ("ar", 2, 1, 2)
    expected = greedy_alone(alone, prompts[1], 2)
    top = run_alone(alone, prompts[1] + expected, 1)[0].topk(2).values.tolist()
    assert d.margin == pytest.approx(top[0] - top[1], abs=1e-5)
