"""`tui-decode calibrate`: measure this machine's run-to-run noise and keep it.

Autoregressive decoding against its own interleaved baseline, a few runs (its true speedup is
exactly 1.00x): how far the runs land from 1.00x beyond their own step jitter is the machine's
run-to-run noise (`decoders.analysis.calibration`). It is kept per machine and model in the user
cache folder, and from then on every run's spread is widened by it, in the app, `run`, `r`, the
sweep and the bench alike.
"""

from __future__ import annotations

import argparse

from decoders.analysis.calibration import MAX_RUNS, MAX_TOKENS, RUNS, TOKENS
from decoders.core.errors import DecodeError
from tui_decode.cli.model_args import add_model_args
from tui_decode.cli.numbers import bounded_int
from tui_decode.cli.views import CalibrateArgs


def add_calibrate_parser(sub) -> None:
    from tui_decode.cli.main import add_threads_arg

    p = sub.add_parser("calibrate", help="measure this machine's run-to-run noise (autoregressive decoding against "
                                         "itself, a few runs) and keep it: every spread then covers a second run")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--prompt", help="the prompt the runs decode (default: the app's sample prompt)")
    src.add_argument("--prompt-file", metavar="PATH", help="read that prompt from a file")
    p.add_argument("--runs", type=bounded_int("--runs", 2, MAX_RUNS), default=RUNS, metavar="N",
                   help=f"runs of autoregressive decoding against itself (2..{MAX_RUNS}, default {RUNS})")
    p.add_argument("--max-new-tokens", type=bounded_int("--max-new-tokens", 4, MAX_TOKENS), default=TOKENS,
                   metavar="N", help=f"tokens each run decodes (4..{MAX_TOKENS}, default {TOKENS})")
    add_threads_arg(p)
    add_model_args(p)


def cmd_calibrate(namespace: argparse.Namespace) -> int:
    from rich.console import Console

    from decoders.analysis.timing import ratio_text
    from decoders.engine import Engine
    from tui_decode.cli.main import check_threads, load_with_progress, read_prompt, set_threads, stdout_console
    from tui_decode.cli.model_args import family_spec
    from tui_decode.state.settings import DEFAULT_PROMPT

    err = Console(stderr=True)
    args = CalibrateArgs.of(namespace)
    check_threads(args.threads)
    given = args.prompt.prompt is not None or args.prompt.prompt_file is not None
    prompt = read_prompt(args.prompt) if given else DEFAULT_PROMPT
    set_threads(args.threads)
    family = load_with_progress(family_spec(args.model), err)
    engine = Engine(family)
    engine.forget_calibration()  # the runs that measure the noise are not widened by an older one
    params = engine.calibration_params(args.max_new_tokens)
    engine.check(prompt, params)
    out = stdout_console()
    results = []
    for i in range(args.runs):
        with err.status(f"calibrating: run {i + 1}/{args.runs} (autoregressive against itself) ..."):
            result = engine.run(prompt, params)
        results.append(result)
        s = result.summary
        out.print(f"run {i + 1}: " + (ratio_text(s.speedup_decode, s.speedup_spread)
                                     if s.speedup_decode is not None else "no decode speedup measured"),
                  markup=False, highlight=False)
    try:
        calibration = engine.keep_calibration([r.summary for r in results])
    except ValueError as error:
        raise DecodeError(f"{error}; decode more tokens (--max-new-tokens) or take more runs (--runs)") from None
    from decoders.analysis.calibration import widen
    from decoders.models.machine import calibration_path

    typical = sorted(calibration.step_spreads)[len(calibration.step_spreads) // 2]
    wide = widen(1.0, typical, calibration.noise)
    out.print(f"run-to-run noise on this machine: {100 * calibration.noise:.1f}% (one standard deviation beyond "
              f"the runs' step jitter), measured {calibration.measured}; kept in {calibration_path()}",
              markup=False, highlight=False)
    if wide is not None:
        out.print(f"from now on a run whose steps alone give +/- {typical:.2f} shows +/- {wide:.2f}: the range a "
                  "second run of the same settings lands in", markup=False, highlight=False)
    return 0
