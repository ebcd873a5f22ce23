"""One best γ everywhere: the plot's legend names the best draft length over the whole range (the
run's `gamma_star`, as the figures table does), marks it past the plot's edge, and marks it
extrapolated when alpha_hat is about 1 on few drafts."""

from __future__ import annotations

from decoders.core.params import DecodeParams
from decoders.engine import Engine
from decoders.records.summary import Summary
from tests.support.engine import PROMPT, tiny_family
from tui_decode.widgets.gamma_plot import legend
from tui_decode.widgets.stats_pane import gamma_plot_data


def summary_with(**extras) -> Summary:
    curve = [[g, round(1 + 0.1 * g, 3)] for g in range(1, 11)]  # still rising at the plot's edge
    return Summary(method="spec", speedup_decode=1.2, speedup_spread=0.1,
                   extras={"curve": curve, "gamma_used": 4, "alpha_hat": 1.0, "c_hat": 0.05, **extras})


def test_the_legend_names_the_tables_best_gamma_past_the_plots_edge():
    data = gamma_plot_data(summary_with(gamma_star=27))
    text = legend(data, {}).plain
    assert "best γ27 (past the edge)" in text and "best γ10" not in text


def test_a_best_gamma_from_alpha_near_one_on_few_drafts_is_marked_extrapolated():
    data = gamma_plot_data(summary_with(gamma_star="32 or more",
                                        gamma_star_extrapolated="alpha_hat 1.00 from 20 judged drafts"))
    assert "best γ32 or more (past the edge, extrapolated)" in legend(data, {}).plain


def test_the_run_marks_its_best_gamma_extrapolated_when_the_helper_is_always_right(one_torch_thread):
    # paired sequentially: the figures come from the method's own run, however its baseline is timed
    engine = Engine(tiny_family(fast=True, helper_noise=0.0), pairing="sequential")  # the helper is the target
    s = engine.run(PROMPT, DecodeParams(method="spec", gamma=2, max_new_tokens=20, draft_policy="fixed")).summary
    assert s.extras["alpha_hat"] >= 0.95
    assert s.extras["gamma_star_extrapolated"].startswith("alpha_hat 1.00 from ")
    often_wrong = Engine(tiny_family(fast=True, helper_noise=0.3), pairing="sequential")
    many = often_wrong.run(PROMPT, DecodeParams(method="spec", gamma=2, max_new_tokens=20)).summary
    assert "gamma_star_extrapolated" not in many.extras  # a helper often wrong: the best gamma is no extrapolation
