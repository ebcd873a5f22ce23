"""What every figure, colour and line of the app means: one sentence and its formula each.

Data, not layout: the help screen (F1, ?) draws these tables, and any pane can look a figure up
by the key it is stored under (`Summary` field, a method's `Figure` key) or by the label it is
shown with (`figure_help`), e.g. for a tooltip. The definitions follow `decoders.analysis.summary`,
`decoders.analysis.stats`, `decoders.analysis.timing` and `decoders.analysis.theory`; change them together.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FigureHelp:
    """One figure: where it is kept, the labels it is shown with, what it says, how it is computed."""

    key: str  # Summary field or method Figure key
    labels: tuple[str, ...]  # the labels the panes show it with
    meaning: str
    formula: str = ""


@dataclass(frozen=True)
class Marking:
    """One colour or mark: what it looks like (content markup), and what it means."""

    sample: str
    meaning: str


# -- figures ---------------------------------------------------------------------------------------
FIGURES: tuple[FigureHelp, ...] = (
    FigureHelp("tokens", ("tokens", "tokens emitted"),
               "Tokens the method emitted, and what stopped it: max tokens (the token budget), end of text (an "
               "end-of-sequence token), the model's context, or escape (cancelled).", "N = len(output)"),
    FigureHelp("iterations", ("iterations",),
               "Draft-and-verify steps (one plain step per token for autoregressive decoding); each costs one "
               "target forward.", "iterations = target forwards"),
    FigureHelp("tau", ("tau", "tau · accept", "tokens / iter", "tau (tokens / target forward)"),
               "Tokens per target forward: what one forward of the big model buys; 1 for autoregressive "
               "decoding.", "τ = tokens / target forwards"),
    FigureHelp("accept_rate", ("accept", "acceptance", "acceptance rate"),
               "Share of the drafted tokens the target judged that it accepted (drafts after a rejection are "
               "never judged): the per-token acceptance α measured.", "α = accepted / judged drafts"),
    FigureHelp("alpha_hat", ("alpha_hat", "α̂"),
               "The acceptance theory expects from the two models' distributions, averaged over the verified "
               "positions (speculative decoding).", "α̂ = mean over positions of Σₓ min(p(x), q(x))"),
    FigureHelp("c_hat", ("c_hat", "ĉ"),
               "The helper's cost relative to the target's: one helper forward in target forwards.",
               "ĉ = mean helper forward ms / mean target one-token forward ms (baseline)"),
    FigureHelp("verify_cost", ("verify cost", "verify cost (one-token forwards)"),
               "What a verify forward (γ+1 tokens at once) costs in one-token target forwards; Theorem 3.8 "
               "assumes 1, true on a GPU with spare compute, not on a small CPU.",
               "T = mean verify ms (drafting iterations after the first) / baseline one-token forward ms"),
    FigureHelp("verify_cost_curve", ("T(k)", "verify cost curve"),
               "The verify cost by width, measured once per context size right after a run.",
               "T(k) = median k-token forward / median one-token forward, k = 1..16"),
    FigureHelp("predicted_speedup", ("predicted", "predicted speedup"),
               "Theorem 3.8 of Leviathan et al. (2023): the speedup expected from α̂, γ and ĉ if a verify "
               "forward cost one step.", "S = (1 − α^(γ+1)) / ((1 − α)(γ·c + 1))"),
    FigureHelp("predicted_speedup_cost_aware", ("predicted (cost)", "w/ verify cost"),
               "The same with the measured cost of the (γ+1)-token verify forward in place of 1.",
               "S_T = (1 − α^(γ+1)) / ((1 − α)(γ·c + T(γ+1)))"),
    FigureHelp("expected_tokens", ("expected tokens / iteration",),
               "Tokens one iteration yields on average at acceptance α̂ (Eq. 1 of Leviathan et al.).",
               "E = (1 − α^(γ+1)) / (1 − α)"),
    FigureHelp("gamma_star", ("best γ",), "The draft length Theorem 3.8 predicts is fastest.",
               "γ* = argmax over γ = 1..32 of S(γ) (\"32 or more\" at the end of the range)"),
    FigureHelp("gamma_star_cost_aware", ("best γ (cost)",), "The fastest draft length with the measured verify cost.",
               "γ*_T = argmax over γ = 1..15 of S_T(γ), T(k) measured to 16 (\"15 or more\" at the end)"),
    FigureHelp("mean_acceptance_length", ("mean acceptance length",),
               "Tokens one verify forward yields per draft (vLLM's metric).", "1 + accepted / drafts"),
    FigureHelp("draft_use", ("draft use",), "Drafted tokens that were accepted (vLLM's draft acceptance rate).",
               "accepted / drafted"),
    FigureHelp("per_position_acceptance", ("per-position acceptance",),
               "For each draft position i, the share of drafts whose token i was accepted (vLLM).",
               "a_i = drafts with token i accepted / drafts"),
    FigureHelp("per_position_acceptance_conditional", ("per-position acceptance (given reached)",),
               "For each draft position, the acceptance among drafts that reached it (every earlier token accepted).",
               "accepted at i / drafts judged at i"),
    FigureHelp("speedup_wall", ("wall speedup", "speedup", "wall speedup vs autoregressive", "end to end"),
               "End to end, the baseline's time over the method's for the tokens both produced, prefill included. "
               "Its spread carries the prefill's own noise (one forward a side, read from how far the two prefills "
               "of the same prompt differ), so a prefill slow by chance moves it and not the decode speedup.",
               "S_wall = t_baseline(N) / t_method(N)"),
    FigureHelp("speedup_decode", ("decode speedup", "decode speedup ±"),
               "The same for the steady state after the first iteration (the prefill is reported as ttft); the "
               "figure a run is judged by (status line, explanation, history), the wall speedup where no decode "
               "rate was measured (marked e2e in the history). Interleaved (the default): the baseline decodes "
               "on a second cache, a step at a time between the method's iterations, each clock stopped while "
               "the other runs, so a machine that turns busy mid-run slows both alike. Sequential (the bench, or "
               "a backend without a second cache): the baseline decoded earlier, rescaled by the drift; its raw "
               "ratio is shown beside it.",
               "S_decode = baseline ms over the same tokens / method ms  (sequential: × drift)"),
    FigureHelp("speedup_spread", ("±", "spread", "speedup ±"),
               "The timing noise of a speedup, about 95%. Interleaved: the machine's step-to-step jitter (the "
               "baseline's one-token steps are the same work, so their successive differences are noise) over "
               "both sides' forwards, and one turn of the alternation by which a change of speed reaches one side "
               "first. Sequential: the drift's error and both rates' step noise. A speedup within its spread of "
               "1.0 reads 'no measurable difference'.",
               "± = speedup · √((2·jitter·√(1/N_base + 1/N_iter))² + (2·|change − 1| / N_iter)²)"),
    FigureHelp("machine_change", ("machine", "paired"),
               "Interleaved runs: how far the machine's step time moved during the run, the baseline's last third "
               "of steps over its first third. Both sides saw it; past 10% the sentence says so.",
               "change = mean(last third of steps) / mean(first third)"),
    FigureHelp("drift", ("drift",),
               "Sequential runs: how much slower (> 1) the machine steps now than when the baseline was decoded "
               "(it is reused): the run's own one-token steps (when it has as many as the probe) or a short probe "
               "after it, each over the baseline's step at the same context. A drift past 20% read from the probe "
               "alone withholds the verdict: it cannot say when the machine changed.",
               "drift = mean over pairs of (one-token step now / the baseline's step at that context)"),
    FigureHelp("ttft_ms", ("ttft",), "Time to the first token: the prompt's prefill and the first iteration.",
               "ttft = end of iteration 0 − start"),
    FigureHelp("decode_ms_per_token", ("decode ms / token", "decode ms/token"),
               "Milliseconds per token after the first iteration (the prefill left out).",
               "(t_end(last) − t_end(first)) / tokens after the first iteration"),
    FigureHelp("method_ms_per_token", ("ms / token", "method ms/token"),
               "Wall time per emitted token, prefill included; the baseline's in brackets.", "wall ms / tokens"),
    FigureHelp("identical", ("identical", "identical to baseline"),
               "Greedy runs only: whether the output is the baseline's token for token; if not, the first "
               "position where they part (a near-tie of the top two logits is float noise, not a bug).",
               "first i with method[i] ≠ baseline[i]"),
    FigureHelp("per_iteration", ("per iteration",),
               "Tokens emitted by each of the last 28 iterations, as bars from ▁ to █.", "len(emit) per iteration"),
)

# -- markings --------------------------------------------------------------------------------------
TOKEN_STREAM: tuple[Marking, ...] = (
    Marking("[$text-success]■ accepted draft[/]", "a drafted token the target accepted"),
    Marking("[$text-warning]■ fixed[/]", "the target's own token where a draft was rejected"),
    Marking("[$text-primary]■ bonus[/]", "the target's extra token after every draft passed"),
    Marking("[$foreground]■ autoregressive[/]", "a plain step: one target forward, one token, no draft"),
    Marking("[underline]underlined[/]", "the tokens of the iteration selected in the table"),
    Marking("[reverse]reversed[/]", "the cursor (← → moves it token by token, ↑ ↓ by iteration)"),
    Marking("[on $panel-lighten-2] [/] shaded", "a whitespace token"),
)

ITERATION_TABLE: tuple[Marking, ...] = (
    Marking("[$text-success]green[/]", "a draft token the target accepted"),
    Marking("[$text-error strike]red struck through[/]", "a draft token the target rejected"),
    Marking("[$foreground-darken-3]grey[/]", "not judged: after the first rejection, or on a branch not taken"),
    Marking("q p acc ▁▃█", "one bar per draft position: the helper's probability q, the target's p, and the "
            "probability of acceptance min(1, p/q); coloured like the draft; · where there is none"),
    Marking("emit", "tokens the iteration emitted"),
    Marking("draft · verify", "milliseconds to draft, and for the target's verify forward"),
)

ITERATION_DETAIL: tuple[Marking, ...] = (
    Marking("[$text-primary]█ p[/]  [$text-secondary]█ q[/]",
            "top-5 of the target's p and of the helper's q at each draft position"),
    Marking("[bold underline]bold underlined[/]", "the drafted or emitted token among the top-5"),
    Marking("[$text-warning bold]n-gram[/]",
            "prompt lookup: the n-gram that matched; the copied tokens follow, underlined"),
    Marking("┬ a  └ b", "a token tree (prompt lookup branches, lookahead, a speculative draft tree): each "
            "node under the one it continues; the accepted path in the accepted colour"),
)

GAMMA_PLOT: tuple[Marking, ...] = (
    Marking("[$text-primary]── Theorem 3.8[/]", "predicted speedup for each γ at the run's α̂ and ĉ (solid)"),
    Marking("[$text-secondary]╌╌ cost-aware[/]", "the same with the measured T(γ+1) in place of one step (dashed)"),
    Marking("[$text-warning]● │[/]", "a measured run (the run, or each value of a sweep, s) with its spread"),
    Marking("[$foreground-darken-3]┈┈ 1.0x[/]", "break-even: above it the method is faster than autoregressive"),
    Marking("▲", "under the axis: the best γ each curve predicts"),
)

COMPARE: tuple[Marking, ...] = (
    Marking("[$foreground-darken-3]  12[/]", "the token position each line starts at, the same on both sides"),
    Marking("[$text-error reverse]≠[/]", "the first position where the two streams part"),
)

KEYS: tuple[tuple[str, str], ...] = (
    ("ctrl+r", "run the method on the prompt, its autoregressive baseline stepping alongside"),
    ("p", "pick a prompt: the shipped Spec-Bench prompts by task group, or your own files"),
    ("escape", "cancel the run at the next iteration; close a screen"),
    ("m · g · [ ]", "next method · greedy / sampling · shorter / longer draft"),
    ("t · e · f", "chat template · edit the prompt · switch model family"),
    ("d · enter", "the selected iteration's detail, full screen"),
    ("i", "the statistics pane: the arrow and page keys scroll its figures (tab reaches it too)"),
    ("s", "sweep the draft length over up to 8 values and plot each measured speedup"),
    ("r", "repeat the current settings 5 times, each beside its own baseline, and pool the speedups"),
    ("b", "batch: each method beside autoregressive decoding at batch sizes you type (1..64), a line per "
          "sequence, speedup against batch size with break-even marked"),
    ("n", "calibrate: this machine's run-to-run noise (autoregressive against itself, 6 runs), kept; "
          "every spread then covers a second run"),
    ("h", "the run history: the last two runs marked; enter compares them, space marks others, x exports it"),
    ("c", "compare the run shown with its autoregressive baseline, side by side"),
    ("ctrl+s · ctrl+o", "save the run shown (JSON + SVG screenshot) · open a saved run"),
    ("F1 · ?", "this help"),
    ("ctrl+p · ctrl+q", "command palette · quit"),
)

SECTIONS: tuple[tuple[str, tuple[Marking, ...]], ...] = (
    ("Output (token stream)", TOKEN_STREAM),
    ("Iterations table", ITERATION_TABLE),
    ("Iteration detail", ITERATION_DETAIL),
    ("Gamma plot (speculative)", GAMMA_PLOT),
    ("Comparison", COMPARE),
)

_BY_KEY = {f.key: f for f in FIGURES}
_BY_LABEL = {label: f for f in FIGURES for label in f.labels}


def figure_help(key_or_label: str) -> FigureHelp | None:
    """A figure's help by its `Summary`/`Figure` key or by a label a pane shows it with (a
    method's own figures included)."""
    found = _BY_KEY.get(key_or_label) or _BY_LABEL.get(key_or_label)
    if found is None:
        found = next((f for f in method_figures() if key_or_label == f.key or key_or_label in f.labels), None)
    return found


def tooltip(key_or_label: str) -> str | None:
    """One line for a tooltip: the sentence, then the formula."""
    found = figure_help(key_or_label)
    if found is None:
        return None
    return f"{found.meaning}\n{found.formula}" if found.formula else found.meaning


def method_figures() -> list[FigureHelp]:
    """The figures methods declare that `FIGURES` does not define, from their own help line."""
    from decoders.core.declarations import all_methods

    out: list[FigureHelp] = []
    for method in all_methods():
        for figure in method.figures:
            if figure.key not in _BY_KEY and all(f.key != figure.key for f in out):
                out.append(FigureHelp(figure.key, (figure.label,), f"{method.label}: {figure.help}."))
    return out
