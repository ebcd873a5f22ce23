"""Suffix decoding at batch B (`decoders.methods.batch.suffix`, issues 38 and 39): each row drafts
what the batch-1 method drafts given the same sequence, from its own tree (grown as it emits) and
the memory of earlier responses (only read, without the run's own prompts' responses), and every
row's greedy output equals its batch-1 autoregressive output. Tiny in-memory models, seconds."""

from __future__ import annotations

import pytest

from decoders.backends.batched import BatchedLM
from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.methods.batch.chain import decode_batch
from decoders.methods.batch.suffix import SuffixDraft, SuffixShape, memory_tree
from decoders.methods.shared.suffix_memory import SuffixMemory, memory_for, prompt_key, reset_memories
from decoders.methods.shared.suffix_tree import SuffixTree
from decoders.methods.suffix import SuffixMatch
from tests.backends.test_batched import PROMPTS, greedy_alone
from tests.support.engine import PROMPT, peaked_model, tiny_family

MAX_NEW = 24
ELSEWHERE = [50, 51, 52, 53, 50, 51, 52, 54]  # a response to a prompt no row runs


@pytest.fixture(scope="module")
def model():
    return peaked_model()


@pytest.fixture(scope="module")
def alone(model):
    """Each prompt's batch-1 autoregressive output (no batching code)."""
    return [greedy_alone(model, p, MAX_NEW) for p in PROMPTS]


@pytest.fixture(autouse=True)
def fresh_memories():
    reset_memories()
    yield
    reset_memories()


def memory_of(responses: dict[str, list[int]], depth: int = 24) -> SuffixMemory:
    memory = SuffixMemory(depth)
    for key, tokens in responses.items():
        memory.add(key, tokens)
    return memory


class Checked:
    """A row's `SuffixDraft`, each proposal checked against the batch-1 drafter built from scratch
    over the same sequence (its own tree over the whole sequence, the memory matched afresh)."""

    def __init__(self, seq, k, shape, log):
        self.inner, self.k, self.shape, self.log = SuffixDraft(seq, k, shape), k, shape, log

    def extend(self, seq):
        self.inner.extend(seq)

    def propose(self, seq, budget):
        got = self.inner.propose(seq, budget)
        fresh = SuffixDraft(list(seq), self.k, self.shape).propose(list(seq), budget)
        self.log.append((got, fresh))
        return got


@pytest.mark.parametrize("size", [1, 2, 3])
@pytest.mark.parametrize("with_memory", [False, True], ids=["own-tree", "with-memory"])
def test_every_row_decodes_its_batch_1_autoregressive_output(model, alone, size, with_memory):
    """Rows of different lengths (11, 3 and 14 prompt tokens), each drafting from its own tree and,
    with a memory, from earlier answers to other prompts that the model now repeats (each row's
    output held as another request's response: long drafts, accepted in part, row by row): each
    row's output is its batch-1 output, token for token, and every proposal is what the batch-1
    drafter gives for that sequence."""
    rows = PROMPTS[:size]
    shape = SuffixShape()
    if with_memory:
        earlier = {f"another prompt {i}": out[: 6 + 5 * i] for i, out in enumerate(alone)}
        shape = SuffixShape(memory=memory_tree(memory_of({**earlier, "elsewhere": ELSEWHERE}), rows, 24))
    log: list = []
    run = decode_batch(BatchedLM(model), rows, MAX_NEW, "suffix", gamma=6,
                       make=lambda seq: Checked(seq, 6, shape, log))
    for i, row in enumerate(run.rows):
        assert row.out == alone[i], f"row {i} parted from its batch-1 output"
    assert run.tokens == MAX_NEW * size
    assert all(got == fresh for got, fresh in log)
    assert sum(row.accepted for row in run.rows) > 0  # drafts were accepted: fewer iterations than tokens
    assert sum(row.iterations for row in run.rows) < run.tokens
    plain = decode_batch(BatchedLM(model), rows, MAX_NEW, "suffix", gamma=6, suffix=shape)  # the method's own drafter
    assert [r.out for r in plain.rows] == [r.out for r in run.rows] and plain.forwards == run.forwards


@pytest.mark.parametrize("source", ["request", "both"])
def test_the_row_drafter_proposes_what_the_batch_1_method_drafted(source):
    """The batch-1 method's own run (fixed draft length, so nothing cuts its drafts): at every
    iteration the row drafter, grown to the same sequence, proposes the very tokens it drafted."""
    engine = Engine(tiny_family(fast=False), pairing="sequential")
    params = DecodeParams(method="suffix", max_new_tokens=40, draft_policy="fixed", suffix_max=6,
                          suffix_source=source, suffix_factor=2.0)
    memory = None
    if source == "both":
        engine.run(PROMPT.replace("w30", "w40"), params)  # an earlier request: its response joins the memory
        memory = memory_for(engine.family, params.suffix_depth).copy()  # as the next run finds it
        assert len(memory) == 1
    result = engine.run(PROMPT, params)
    assert result.method.ids == result.baseline.ids
    shape = SuffixShape(params.suffix_depth, params.suffix_factor, params.suffix_min_prob,
                        memory.tree if memory is not None else None)
    prompt, out = list(result.prompt_ids), result.method.ids
    drafter = SuffixDraft(list(prompt), params.suffix_max, shape)
    proposed, drafted = [], []
    for it in result.method.iters:
        seq = prompt + out[:it.pos]
        drafter.extend(seq)
        proposed.append(drafter.propose(seq, params.max_new_tokens - it.pos - 1))
        drafted.append([row.token for row in it.draft])
    assert proposed == drafted
    assert sum(map(len, drafted)) >= 10
    sources = {it.detail.source for it in result.method.iters if isinstance(it.detail, SuffixMatch)}
    assert ("memory" in sources) == (source == "both")


def test_no_row_drafts_its_own_output_and_the_memory_is_only_read(model, alone):
    """A memory that holds the rows' own answers (a rerun's, or the baseline's twin) would hand each
    row the output it is compared with: the rows draft from the memory without them, and the
    memory is the same after the run (no row's output joined it)."""
    rows = PROMPTS[:2]
    memory = memory_of({**{prompt_key(p): out for p, out in zip(PROMPTS, alone, strict=True)},
                        "elsewhere": ELSEWHERE})
    held, nodes = [(e.prompt, list(e.tokens)) for e in memory.entries.values()], memory.nodes
    tree = memory_tree(memory, rows, 24)
    expected = SuffixTree(24)
    for out in [*alone[2:], ELSEWHERE]:
        expected.add(out)
    assert tree.substrings() == expected.substrings()  # the rows' own answers left out, the rest kept
    before = tree.substrings()
    run = decode_batch(BatchedLM(model), rows, MAX_NEW, "suffix", gamma=8, suffix=SuffixShape(memory=tree))
    assert [r.out for r in run.rows] == alone[:2]
    assert tree.substrings() == before  # read only: nothing joined while the rows decoded
    assert [(e.prompt, list(e.tokens)) for e in memory.entries.values()] == held and memory.nodes == nodes
    # where no response to the run's prompts is held, the memory's own tree is read (no copy)
    assert memory_tree(memory_of({"elsewhere": ELSEWHERE}), rows, 24) is not None
    lean = memory_of({"elsewhere": ELSEWHERE})
    assert memory_tree(lean, rows, 24) is lean.tree
    deeper = memory_tree(lean, rows, 8)  # another depth: a copy at that depth, the memory left as it was
    assert deeper.depth == 8 and lean.depth == 24 and deeper is not lean.tree


def test_a_memory_of_another_depth_is_one_line():
    from decoders.core.errors import DecodeError

    with pytest.raises(DecodeError, match="built at depth 8, the rows draft at depth 24; give --suffix-depth 8"):
        SuffixDraft([1, 2, 3], 4, SuffixShape(memory=SuffixTree(8)))
