"""Speculative decoding at batch B on llama.cpp: a GGUF helper drafts every row's chain in a
`LlamaCppBatched` context of its own (`decoders.methods.batch.model_draft.ModelDraft`), the
target verifies every chain in one ``llama_decode``, and the rows the target rejected are rolled
back out of the draft's cache (`LlamaCppBatched.rollback`). The helper is the bundled Q4_1 file
requantised to Q4_0, so its drafts are accepted in part. Each row's greedy output at B = 1, 2, 3
equals its batch-1 output on the plain llama.cpp backend, exactly: llama.cpp gives a row of the
bundled file the same logits in any batch (`test_llamacpp_batched`), so there is no near tie
to report here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("llama_cpp")

from decoders.backends.llamacpp import LlamaCppBackend, LlamaModel  # noqa: E402
from decoders.backends.llamacpp_batched import LlamaCppBatched  # noqa: E402
from decoders.bench.batch_spec import check_spec, spec_drafts  # noqa: E402
from decoders.core.errors import DecodeError  # noqa: E402
from decoders.methods.batch.chain import decode_batch  # noqa: E402
from decoders.methods.batch.model_draft import ModelDraft  # noqa: E402
from decoders.models.bundled import bundled_gguf_path  # noqa: E402
from decoders.models.drafts import HelperModel  # noqa: E402
from tests.backends.test_llamacpp_batched import PROMPTS, TOKENS, greedy_alone, run_alone  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return LlamaModel(bundled_gguf_path())


@pytest.fixture(scope="module")
def helper(q4_0_helper_gguf):
    return LlamaModel(q4_0_helper_gguf)


@pytest.fixture(scope="module")
def alone(model):
    return LlamaCppBackend(model, max_positions=256)


@pytest.fixture(scope="module")
def expected(alone):
    with torch.inference_mode():
        return [greedy_alone(alone, p, TOKENS) for p in PROMPTS]


def test_a_rollback_forgets_each_rows_last_tokens(model, alone):
    lm = LlamaCppBatched(model, 2, 64)
    lm.start(PROMPTS[:2])
    lm.step([[7, 8, 9], [5, 6, 4]])
    with pytest.raises(ValueError, match="rollback takes 0..each row's tokens for each of the 2 rows after a commit"):
        lm.rollback([1, 0])  # the step is not committed yet
    lm.commit([3, 3])
    lm.rollback([2, 0])  # row 0 keeps 7; row 1 keeps all three
    assert lm.next_pos == [len(PROMPTS[0]) + 1, len(PROMPTS[1]) + 3]
    logits = lm.step([[30], [31]])[:, 0]
    torch.testing.assert_close(logits, torch.stack([run_alone(alone, PROMPTS[0] + [7, 30], 1)[0],
                                                    run_alone(alone, PROMPTS[1] + [5, 6, 4, 31], 1)[0]]),
                               atol=1e-3, rtol=0)
    lm.commit([1, 1])
    with pytest.raises(ValueError, match="rollback takes"):
        lm.rollback([0, 99])


@pytest.mark.parametrize("size", [1, 2, 3])
def test_each_row_of_a_llama_cpp_spec_batch_decodes_its_batch_1_output(model, helper, expected, size):
    prompts = PROMPTS[:size]
    draft = ModelDraft(LlamaCppBatched(helper, size, 64), 3)
    run = decode_batch(LlamaCppBatched(model, size, 64), prompts, TOKENS, "spec", draft=draft)
    assert [row.out for row in run.rows] == expected[:size]
    drafted = sum(row.drafted for row in run.rows)
    accepted = sum(row.accepted for row in run.rows)
    assert 0 < accepted < drafted  # the Q4_0 helper is right in part: drafts kept and drafts rolled back
    assert run.forwards < 1 + TOKENS  # fewer verify forwards than one a token
    assert draft.lm.rows == 0  # every row left the draft's batch with the target's


@pytest.mark.parametrize("leaving", [0, 1])
def test_a_finished_row_leaves_both_the_target_and_the_drafts_batch(model, helper, expected, leaving):
    stop = expected[leaving][3]
    draft = ModelDraft(LlamaCppBatched(helper, 3, 64), 3)
    rows: list[int] = []
    real = draft.keep_rows

    def keep_rows(kept):
        real(kept)
        rows.append(draft.lm.rows)

    draft.keep_rows = keep_rows
    run = decode_batch(LlamaCppBatched(model, 3, 64), PROMPTS[:3], TOKENS, "spec", draft=draft,
                       stop_ids=frozenset({stop}))
    for row, want in zip(run.rows, expected[:3], strict=True):
        assert row.out == (want[: want.index(stop) + 1] if stop in want else want)
    assert run.rows[leaving].finish == "eos"
    assert any(0 < n < 3 for n in rows)  # the draft went on with fewer rows, in moved sequences


def llama_family(alone, helper_backend, draft):
    return SimpleNamespace(main=alone, main_model=None, helper=helper_backend, helper_model=None, draft=draft,
                           label="bundled (llama.cpp)", stop_ids=frozenset(), context_length=256,
                           describe=lambda: {"label": "bundled (llama.cpp)"})


def test_spec_on_llama_cpp_is_refused_only_without_a_gguf_helper(alone, helper):
    with pytest.raises(DecodeError) as err:
        check_spec(llama_family(alone, None, None))
    assert str(err.value) == ("speculative decoding at batch > 1 on llama.cpp needs a GGUF helper model: give --helper "
                              "FILE.gguf (or --helper bundled), or drop spec from --methods")
    family = llama_family(alone, LlamaCppBackend(helper, max_positions=64), HelperModel(source="q4_0.gguf"))
    check_spec(family)
    spec = SimpleNamespace(method="spec", k=3)
    make = spec_drafts(family, [spec], 40)
    first, again = make(spec, 2), make(spec, 2)
    assert isinstance(first.lm, LlamaCppBatched) and first.lm is again.lm  # a context per batch size, reused
    assert first.lm.capacity == 2 and first.lm.model is helper and first.gamma == 3
    assert make(SimpleNamespace(method="pld", k=3), 2) is None and make(spec, 1).lm.capacity == 1


def test_the_batch_bench_runs_spec_on_llama_cpp(alone, helper):
    from decoders.bench.batch import run_batch_bench

    family = llama_family(alone, LlamaCppBackend(helper, max_positions=64), HelperModel(source="q4_0.gguf"))
    report = run_batch_bench(family, [PROMPTS[0], PROMPTS[1], PROMPTS[2]], [1, 3], ["ar", "spec"], 6, rounds=1, k=3,
                             surface_repeats=1, surface_widths=1)
    assert [(r.method, r.batch) for r in report.rows] == [("ar", 1), ("spec", 1), ("ar", 3), ("spec", 3)]
    assert all(r.identical for r in report.rows) and report.divergences == []
    assert report.rows[3].accepted_per_forward > 1.0


def test_the_helpers_cache_counts_in_the_memory_a_spec_batch_needs(model, helper):
    from decoders.backends.llamacpp_batched import check_batch

    check_batch(model, [1, 16], positions=1000, width=11, available=1_200_000_000)  # the target alone fits
    with pytest.raises(DecodeError) as err:
        check_batch(model, [1, 16], positions=1000, width=11, available=1_200_000_000, draft=helper)
    assert str(err.value).startswith("batch size 16 needs about ")
    assert str(err.value).endswith("for its llama.cpp caches and logits (the target's and the helper's), more than "
                                   "half of the 1.2 GB available; give smaller --batch sizes or lower --max-new-tokens")
