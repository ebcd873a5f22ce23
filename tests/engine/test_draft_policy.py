"""The adaptive draft length drafts what pays for itself, and survives a timing outlier."""

from __future__ import annotations

from decoders.methods.shared.draft_policy import AdaptiveDraftLength


def feed(policy, match_len, drafted, accepted, slope, step=0.05):
    policy.observe(None, 0, 0, 1, step)  # a one-token step to compare against
    policy.observe(match_len, drafted, accepted, drafted + 1, step * (1 + slope * drafted))


def test_cheap_verifies_and_good_matches_draft_long():
    policy = AdaptiveDraftLength(10)
    for _ in range(20):
        feed(policy, 3, 8, 8, slope=0.01)
    assert policy.choose(3, 10) == 10


def test_expensive_verifies_and_poor_matches_do_not_draft():
    policy = AdaptiveDraftLength(10)
    for _ in range(20):
        feed(policy, 1, 3, 0, slope=0.4)
    assert policy.acceptance(1) < 0.1
    assert policy.choose(1, 10) == 0
    assert policy.choose(3, 10) > 0  # an unseen 3-gram match still gets its prior chance


def test_one_slow_forward_does_not_switch_drafting_off():
    policy = AdaptiveDraftLength(10)
    for _ in range(5):
        feed(policy, 2, 4, 3, slope=0.1)
    feed(policy, 2, 4, 3, slope=50.0)  # a page fault or a garbage collection
    assert policy.slope < 0.2
    assert policy.choose(2, 10) >= 2


def test_a_measured_cost_curve_decides_the_draft_length():
    """The same acceptance drafts long where T(k) is flat (a GPU) and stays short where it climbs."""
    flat = AdaptiveDraftLength(10, cost_curve=[1.0] * 16)
    steep = AdaptiveDraftLength(10, cost_curve=[1.0] + [1.0 + 0.8 * k for k in range(1, 16)])
    for policy in (flat, steep):
        for _ in range(20):
            policy.observe(2, 4, 2, 5, 0.05)  # half the drafts pass
    assert flat.choose(2, 10) == 10 and steep.choose(2, 10) == 0


def test_a_noisy_curve_never_makes_a_wider_forward_cheaper():
    """T(4) measured below T(3) is timing noise: the cost of 4 positions is at least that of 3."""
    from decoders.methods.shared.draft_policy import VerifyCost

    verify = VerifyCost([1.0, 1.16, 1.23, 1.19, 1.16, 1.27])
    assert [verify.cost(n) for n in range(1, 7)] == [1.0, 1.16, 1.23, 1.23, 1.23, 1.27]


def test_a_policy_that_stopped_drafting_measures_again_now_and_then():
    policy = AdaptiveDraftLength(10)
    for _ in range(20):
        feed(policy, 1, 3, 0, slope=0.4)
    choices = [policy.choose(1, 10) for _ in range(16)]
    assert choices.count(0) == 14 and choices[7] == 2 and choices[15] == 2


# --- speculative decoding's adaptive draft length

from decoders.methods.shared.draft_policy import STOP_EXPLORE, STOP_GAMMA, STOP_PAY, STOP_SKIP, SpecDraftPolicy  # noqa: E402


def spec_feed(policy, confs, accepted, c=0.3, step=0.05, slope=0.1):
    policy.observe([], 0, [], 1, step)
    policy.observe(confs, accepted, [c * step] * len(confs), len(confs) + 1, step * (1 + slope * len(confs)))


def test_a_helper_that_is_rarely_accepted_and_costly_drafts_nothing():
    """Early exit on the bundled model: accepted 16% at c = 0.73. A plain step is cheaper."""
    policy = SpecDraftPolicy(4)
    for _ in range(30):
        spec_feed(policy, [0.4, 0.4], 0, c=0.73)
    assert policy.alpha() < 0.1 and 0.7 < policy.c < 0.76
    plans = [policy.plan(4) for _ in range(40)]
    assert plans[0] == (0, STOP_SKIP)
    explored = [i for i, (k, why) in enumerate(plans) if why == STOP_EXPLORE]
    # it still re-measures now and then, less often while drafting keeps not paying
    assert len(explored) >= 2 and all(k == 2 for k, why in plans if why == STOP_EXPLORE)
    assert explored[1] - explored[0] > explored[0] + 1


def test_a_cheap_faithful_helper_drafts_the_full_gamma_and_stops_on_low_confidence():
    policy = SpecDraftPolicy(6, cost_curve=[1.0 + 0.05 * k for k in range(16)])
    for _ in range(30):
        spec_feed(policy, [0.99] * 6, 6, c=0.2)  # confident drafts always pass
        spec_feed(policy, [0.99, 0.2], 1, c=0.2)  # unsure drafts fail
    assert policy.plan(6) == (6, None)
    assert policy.keep_drafting([0.99, 0.99, 0.99], 6)
    assert not policy.keep_drafting([0.99, 0.2], 6)  # the next token would follow a likely rejection
    assert not policy.keep_drafting([0.99] * 6, 6)  # gamma reached
    assert policy.plan(2) == (2, None)  # never more than the tokens left


def test_sampling_policies_decide_from_fixed_costs_only():
    """A seed must give the same tokens: timings (which differ run to run) are never read."""
    a, b = SpecDraftPolicy(4, fixed_costs=(0.3, 0.15)), SpecDraftPolicy(4, fixed_costs=(0.3, 0.15))
    for i in range(20):
        spec_feed(a, [0.9, 0.8], 1, step=0.05)
        spec_feed(b, [0.9, 0.8], 1, step=0.05 * (1 + i))  # a machine slowing down
    assert a.c == b.c == 0.3 and a.verify.cost(5) == b.verify.cost(5) == 1.6
    assert [a.keep_drafting([0.9] * k, 4) for k in range(1, 4)] == [b.keep_drafting([0.9] * k, 4) for k in range(1, 4)]


def test_adaptive_speculative_runs_record_why_each_draft_stopped(monkeypatch):
    """Tiny helpers cost as much as their target; a helper ten times cheaper is what pays."""
    monkeypatch.setattr(SpecDraftPolicy, "c", property(lambda self: 0.1))
    from decoders.core.params import DecodeParams
    from decoders.engine import Engine
    from tests.support.engine import PROMPT, tiny_family

    good = Engine(tiny_family(fast=True, helper_noise=0.0))  # the helper is the target: always accepted
    run = good.run(PROMPT, DecodeParams(method="spec", gamma=4, max_new_tokens=90)).method
    stops = [it.draft_stop for it in run.iters]
    # every draft passes, whatever the helper's confidence: the full gamma throughout
    assert set(stops[:-1]) == {STOP_GAMMA} and len(stops) <= 20
    bad = Engine(tiny_family(fast=True, helper_noise=3.0))  # a helper that is never right
    result = bad.run(PROMPT, DecodeParams(method="spec", gamma=4, max_new_tokens=40))
    stops = [it.draft_stop for it in result.method.iters]
    assert stops.count(STOP_SKIP) >= len(stops) // 2 and result.summary.identical
    assert result.to_json()["runs"]["method"]["iters"][-2]["draft_stop"] in (STOP_SKIP, STOP_EXPLORE, STOP_PAY)
