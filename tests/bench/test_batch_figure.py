"""The synthetic cells drawn (`decoders.bench.batch_figure`): each measured point's glyph in the
cell its (γ, speedup) maps to, Theorem 3.8 and the finite prediction through their own values,
break-even on its row, the within-10% counts in each panel's title, and the figure in report.md
inside a fenced block."""

from __future__ import annotations

from decoders.bench.batch_figure import (
    GLYPHS,
    LABEL_WIDTH,
    draw_panel,
    figure_lines,
    figure_section,
    panel_lines,
    panel_title,
    plain,
    within,
)
from tests.support.synthetic_rows import cell, fixed_rows

ALPHAS = (0.5, 0.9)


def at_batch(batch: int):
    return [r for r in fixed_rows() if r.batch == batch]


def test_each_measured_point_lands_in_the_cell_of_its_gamma_and_speedup():
    rows = at_batch(4)
    canvas, scale = draw_panel(rows, ALPHAS, 40, 10)
    for r in rows:
        x, y = scale.x(r.gamma), scale.y(r.decode_speedup)
        glyph = GLYPHS[ALPHAS.index(r.alpha)]
        assert canvas.marks[(y // 4, x // 2)] == (glyph, f"alpha{ALPHAS.index(r.alpha)}"), r.label
    # γ 1 at the left edge, γ 4 at the right; the highest point near the top, break-even inside
    assert scale.x(1) == 0 and scale.x(4) == canvas.width - 1
    assert scale.bottom < 1.0 < scale.top
    highest = max(max(r.decode_speedup + r.spread, r.predicted, r.predicted_finite) for r in rows)
    assert 0 < scale.y(highest) <= 4  # in the top row, below the margin


def test_both_predictions_pass_through_their_own_values_and_not_each_others():
    rows = at_batch(1)
    canvas, scale = draw_panel(rows, ALPHAS, 40, 10)
    for r in rows:
        x = scale.x(r.gamma)
        assert canvas.is_set(x, scale.y(r.predicted)), f"Theorem 3.8 misses {r.label}"
        assert canvas.is_set(x, scale.y(r.predicted_finite)), f"the finite prediction misses {r.label}"
    # a curve drawn from another column would miss: nothing is drawn where neither passes at γ 4, α 0.9
    top = max((r for r in rows if r.alpha == 0.9), key=lambda r: r.gamma)
    between = (top.predicted + top.predicted_finite) / 2
    assert scale.y(top.predicted) != scale.y(between) != scale.y(top.predicted_finite)
    assert not canvas.is_set(scale.x(4), scale.y(top.predicted) - 3)


def test_the_finite_prediction_is_dashed_and_theorem_3_8_solid():
    flat = [cell(1, 0.5, g, 2.0, 1.5, 1.5, spread=None) for g in (1, 2)]
    canvas, scale = draw_panel(flat, (0.5,), 20, 8)
    solid = [canvas.is_set(x, scale.y(2.0)) for x in range(canvas.width)]
    dashed = [canvas.is_set(x, scale.y(1.5)) for x in range(canvas.width)]
    assert all(solid) and dashed[:4] == [True, True, False, False]


def test_each_panel_marks_break_even_names_each_curve_and_counts_the_cells_within_10_percent():
    rows = at_batch(4)
    lines = [plain(line) for line in panel_lines(4, rows, ALPHAS, 40)]
    finite, theorem = within(rows)
    assert (finite, theorem) == (sum(abs(r.ratio_finite - 1) <= 0.1 for r in rows),
                                 sum(abs(r.ratio - 1) <= 0.1 for r in rows))
    assert lines[0] == panel_title(4, rows) == (f"batch 4: within 10% of the finite prediction in {finite} of 8 "
                                                f"cells, of Theorem 3.8 in {theorem} of 8")
    _, scale = draw_panel(rows, ALPHAS, 40, 10)
    even = lines[1 + scale.y(1.0) // 4]
    assert even.startswith(" 1.0x┤") or even.startswith("1.00x┤")
    assert "┈" in even
    for alpha, glyph in zip(ALPHAS, GLYPHS, strict=False):
        last = max((r for r in rows if r.alpha == alpha), key=lambda r: r.gamma)
        assert f"{glyph} α={alpha:g}" in lines[1 + scale.y(last.predicted) // 4]
    assert lines[-1].split() == ["γ", "1", "2", "3", "4"]
    assert lines[-2] == " " * (LABEL_WIDTH - 1) + "└" + "─" * 40


def test_the_figure_has_a_legend_and_a_panel_per_batch_size_in_a_fenced_block():
    section = figure_section(fixed_rows())
    assert section[:3] == ["### Measured against predicted, per α (synthetic)", "", "```text"]
    assert section[-1] == "```" and section.count("```") == 1
    body = "\n".join(section)
    assert "━ Theorem 3.8, cost-aware (predicted)" in body and "╍ finite budget (predicted finite)" in body
    assert "┈ break-even 1.0x" in body and "● α=0.5" in body and "▲ α=0.9" in body
    titles = [plain(line) for line in figure_lines(fixed_rows()) if plain(line).startswith("batch ")]
    assert [t.split(":")[0] for t in titles] == ["batch 1", "batch 4"]
    assert figure_section([]) == []
