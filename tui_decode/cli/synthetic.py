"""``--synthetic-acceptance`` and ``--synthetic-cost``: `tui-decode run` with the synthetic draft
(`decoders.methods.synthetic`), a measuring instrument registered only when these flags ask for it."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from decoders.core.errors import DecodeError
from tui_decode.cli.views import RunArgs


def add_synthetic_args(p: argparse.ArgumentParser) -> None:
    """The two flags, unless the synthetic method is registered already (its parameters are then
    among the method parameters `add_decode_args` made)."""
    from decoders.core.params import method_param_specs
    from decoders.methods.synthetic import COST, RATES

    if RATES.name in method_param_specs():
        return
    g = p.add_argument_group("synthetic acceptance (a measuring instrument; see docs/methods/synthetic.md)")
    g.add_argument(RATES.flag, dest=RATES.name, type=RATES.parse_rates, default=None, metavar="A[,A...]",
                   help=f"{RATES.help}; runs the synthetic draft in place of --method")
    g.add_argument(COST.flag, dest=COST.name, type=float, default=None, metavar="C",
                   help=f"{COST.help} (0..4; default {COST.default:g}); needs --synthetic-acceptance")


def synthetic_method(args: RunArgs) -> RunArgs:
    """``args`` as the run decodes them: where they ask for synthetic acceptance, with the
    synthetic method (registered now) and its two parameters (their defaults where not given) in
    ``decode``; else unchanged. DecodeError for a cost given without rates."""
    from decoders.methods.synthetic import COST, NAME, RATES, enable

    rates, cost = args.synthetic_acceptance, args.synthetic_cost
    if rates is None and args.decode.method != NAME:
        if cost is not None:
            raise DecodeError("--synthetic-cost needs --synthetic-acceptance RATES (e.g. 0.8 or 0.9,0.8,0.7)")
        return args
    enable()
    rates = RATES.default if rates is None else rates
    cost = COST.default if cost is None else cost
    values = {**dict(args.decode.values), RATES.name: rates, COST.name: cost}
    decode = replace(args.decode, method=NAME, values=tuple(values.items()))
    return replace(args, decode=decode, synthetic_acceptance=rates, synthetic_cost=cost)


def add_synthetic_grid_args(p: argparse.ArgumentParser) -> None:
    """`tui-decode bench --batch`'s synthetic cells: ``--synthetic-grid`` and, unless the synthetic
    method is registered already (its parameters then among the bench's method parameters),
    ``--synthetic-cost``."""
    from decoders.bench.batch_synthetic import MAX_ALPHAS, MAX_CELLS, MAX_GAMMA
    from decoders.core.params import method_param_specs
    from decoders.methods.synthetic import COST

    g = p.add_argument_group("synthetic acceptance at batch B (a measuring instrument, with --batch; see "
                             "decoders/bench/batch_synthetic.py)")
    g.add_argument("--synthetic-grid", default=None, metavar="A[,A...][:G..G]",
                   help="with --batch, also measure a synthetic draft (each sequence's own batch-1 greedy tokens, "
                        "right with probability A at every position) for every acceptance A (0..1, at most "
                        f"{MAX_ALPHAS}) and draft length G (1..{MAX_GAMMA}; default 1..8; at most {MAX_CELLS} cells) "
                        "at every batch size, beside autoregressive decoding and the cost-aware Theorem 3.8 at "
                        "T(B, k) measured at that size, in rows of their own labelled synthetic; e.g. "
                        "0.5,0.7,0.9:1..8 (--methods then defaults to ar)")
    if COST.name not in method_param_specs():
        g.add_argument(COST.flag, dest=COST.name, type=float, default=None, metavar="C",
                       help=f"{COST.help} (0..4; default {COST.default:g}); with --synthetic-grid: per position of "
                            "the batch's longest chain, in one-token steps of the batch T(B, 1)")


def synthetic_grid(args) -> Any:
    """The `SyntheticGrid` ``args`` (`BenchArgs`) ask for, or None; DecodeError in one line for a
    grid without --batch, a cost without a grid, or a grid out of its bounds."""
    from decoders.bench.batch_synthetic import parse_grid

    grid, cost = args.synthetic_grid, args.synthetic_cost
    if grid is None:
        if cost is not None:
            raise DecodeError("--synthetic-cost is the cost of --synthetic-grid's draft; give --synthetic-grid "
                              "A[,A...][:G..G] too (e.g. 0.5,0.7,0.9:1..8)")
        return None
    if args.batch is None:
        raise DecodeError("--synthetic-grid measures in the batch bench; give --batch too (e.g. --batch 1,4)")
    return parse_grid(grid, cost)
