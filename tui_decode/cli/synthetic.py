"""``--synthetic-acceptance`` and ``--synthetic-cost``: `tui-decode run` with the synthetic draft
(`decoders.methods.synthetic`), a measuring instrument registered only when these flags ask for it."""

from __future__ import annotations

import argparse

from decoders.core.errors import DecodeError


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


def synthetic_method(args: argparse.Namespace) -> str | None:
    """"synthetic" (registered now) when ``args`` ask for synthetic acceptance, else None;
    DecodeError for a cost given without rates."""
    from decoders.methods.synthetic import COST, NAME, RATES, enable

    rates = getattr(args, RATES.name, None)
    cost = getattr(args, COST.name, None)
    if rates is None and args.method != NAME:
        if cost is not None:
            raise DecodeError("--synthetic-cost needs --synthetic-acceptance RATES (e.g. 0.8 or 0.9,0.8,0.7)")
        return None
    enable()
    if rates is None:
        setattr(args, RATES.name, RATES.default)
    if cost is None:
        setattr(args, COST.name, COST.default)
    args.method = NAME
    return NAME
