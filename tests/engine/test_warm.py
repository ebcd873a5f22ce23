"""`Engine.warm`: the prompt's first decode, untimed, on every runner a run uses (issue 36)."""

from __future__ import annotations

import pytest

from decoders.core.params import DecodeParams
from decoders.engine import Engine
from tests.support.engine import PROMPT, tiny_family

PARAMS = DecodeParams(method="spec", gamma=3, max_new_tokens=40, draft_policy="fixed")


@pytest.mark.parametrize("pairing", ["interleaved", "sequential"])
def test_warming_up_decodes_on_every_runner_and_keeps_nothing_a_run_would_reuse_as_timed(pairing, monkeypatch):
    from decoders.backends.kv_cache import KVCache

    engine = Engine(tiny_family(fast=True), pairing=pairing)
    cold = Engine(tiny_family(fast=True), pairing=pairing).run(PROMPT, PARAMS)
    ids = engine.prompt_ids(PROMPT, PARAMS)
    asked: dict[int, int] = {}  # the most room each cache was asked for
    reserve = KVCache.reserve

    def reserving(self, needed):
        asked[id(self)] = max(asked.get(id(self), 0), needed)
        return reserve(self, needed)

    monkeypatch.setattr(KVCache, "reserve", reserving)
    engine.warm(PROMPT, PARAMS)
    monkeypatch.undo()
    runners = {"main": engine.main, "helper": engine.helper}
    if pairing == "interleaved":
        runners["twin"] = engine.twin_runner()
    for name, runner in runners.items():
        assert runner.log, name  # it decoded the prompt
        # room for the whole run made now, not grown inside the timed one
        assert asked[id(runner.backend.cache)] >= len(ids) + PARAMS.max_new_tokens, name
    assert engine.baselines_measured == 0  # no baseline kept: the timed run decodes its own
    assert engine.known_cost_curve(len(ids)) is not None  # an adaptive policy finds T(k) on the first run
    warm = engine.run(PROMPT, PARAMS)
    assert warm.method.ids == cold.method.ids and warm.baseline.ids == cold.baseline.ids
    assert warm.summary.pairing == pairing


def test_a_warm_up_of_a_bad_prompt_says_what_is_wrong_before_decoding():
    from decoders.core.errors import DecodeError

    engine = Engine(tiny_family(fast=True))
    with pytest.raises(DecodeError, match="the prompt is empty"):
        engine.warm("  ", PARAMS)
    assert not engine.main.log
