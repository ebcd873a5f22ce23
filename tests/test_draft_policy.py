"""The adaptive draft length drafts what pays for itself, and survives a timing outlier."""

from __future__ import annotations

from decoders.methods.draft_policy import AdaptiveDraftLength


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


def test_a_policy_that_stopped_drafting_measures_again_now_and_then():
    policy = AdaptiveDraftLength(10)
    for _ in range(20):
        feed(policy, 1, 3, 0, slope=0.4)
    choices = [policy.choose(1, 10) for _ in range(16)]
    assert choices.count(0) == 14 and choices[7] == 2 and choices[15] == 2
